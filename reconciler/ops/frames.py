"""The read models as pandas DataFrames, the form plotly and ``st.dataframe`` take: times
timezone-aware (UTC, or the viewer's zone), one row per point. Pure: values in, frames out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any

import pandas as pd

from reconciler.ops.display import NOTHING, age, cell, major_units
from reconciler.ops.overview import BucketCount, SnapshotPoint
from reconciler.ops.timerange import bucket_start

COUNT_COLUMNS = ["time", "source", "outcome", "n"]
HISTORY_COLUMNS = ["time", "name", "depth", "oldest_age_seconds"]


def _times(values: Iterable[datetime], tz: tzinfo) -> pd.Series:
    return pd.Series(pd.to_datetime(list(values), utc=True)).dt.tz_convert(tz)


def counts_frame(counts: Sequence[BucketCount], width: int, tz: tzinfo = UTC) -> pd.DataFrame:
    """Bucketed counts: one row per (bucket start, source, outcome) with a count."""
    if not counts:
        return pd.DataFrame(columns=COUNT_COLUMNS)
    frame = pd.DataFrame(
        {
            "time": _times((bucket_start(c.bucket, width) for c in counts), tz),
            "source": [c.source for c in counts],
            "outcome": [c.key for c in counts],
            "n": [c.n for c in counts],
        }
    )
    return frame.sort_values(["time", "source", "outcome"], ignore_index=True)


def history_frame(
    points: Sequence[tuple[str, int, float, float]],
    width: int,
    tz: tzinfo = UTC,
    *,
    every_seconds: float = 60,
) -> pd.DataFrame:
    """Snapshot maxima per bucket and name, ``(name, bucket, depth, oldest age)``. Snapshots come
    every ``every_seconds``; where a name has none for more than two such intervals, a row with no
    values breaks its line, so a chart never draws a level across a gap it knows nothing about."""
    step = max(1, -(-int(every_seconds) // width))  # buckets between two snapshots, rounded up
    rows: list[dict[str, Any]] = []
    by_name: dict[str, list[tuple[int, float, float]]] = {}
    for name, bucket, depth, oldest in points:
        by_name.setdefault(name, []).append((bucket, depth, oldest))
    for name, pts in sorted(by_name.items()):
        previous: int | None = None
        for bucket, depth, oldest in sorted(pts):
            if previous is not None and bucket - previous > 2 * step:
                rows.append({"bucket": previous + 1, "name": name, "depth": None, "age": None})
            rows.append({"bucket": bucket, "name": name, "depth": depth, "age": oldest})
            previous = bucket
    if not rows:
        return pd.DataFrame(columns=HISTORY_COLUMNS)
    return pd.DataFrame(
        {
            "time": _times((bucket_start(r["bucket"], width) for r in rows), tz),
            "name": [r["name"] for r in rows],
            "depth": pd.array([r["depth"] for r in rows], dtype="Float64"),
            "oldest_age_seconds": pd.array([r["age"] for r in rows], dtype="Float64"),
        }
    )


def snapshot_points(points: Sequence[SnapshotPoint]) -> list[tuple[str, int, float, float]]:
    return [(p.source, p.bucket, p.unprocessed, p.oldest_age_seconds) for p in points]


def table(
    rows: Sequence[Mapping[str, Any]],
    tz: tzinfo = UTC,
    *,
    money_columns: Mapping[str, str] | None = None,
    age_columns: Sequence[str] = (),
    drop: Sequence[str] = (),
    text: Sequence[str] = (),
) -> pd.DataFrame:
    """Rows for ``st.dataframe`` as people read them: datetimes ISO with their zone, amounts as
    numbers in the currency's own units with the currency code in the column beside them
    (``money_columns``: amount column → currency column; a table sorts them, a spreadsheet sums
    them), ages in hours and minutes, nothing shown as ``None``; ids are left whole. ``text``
    columns are text in every row (an HTTP status that is sometimes absent: Arrow takes one type
    per column, and a column of numbers and ``-`` logs a conversion traceback per render)."""
    money_columns = dict(money_columns or {})
    out: list[dict[str, Any]] = []
    for row in rows:
        shown: dict[str, Any] = {}
        for key, value in row.items():
            if key in drop or key in money_columns.values():
                continue
            if key in money_columns:
                currency_key = money_columns[key]
                if value is None:
                    shown[key], shown[currency_key] = None, NOTHING
                else:
                    shown[key], shown[currency_key] = major_units(int(value), row.get(currency_key))
            elif key in age_columns:
                shown[key] = age(value)
            elif key in text:
                shown[key] = str(cell(value, tz))
            else:
                shown[key] = cell(value, tz)
        out.append(shown)
    return pd.DataFrame(out)
