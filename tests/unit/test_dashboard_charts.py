"""The Overview's and Outbox's figures (pure: frames in, figures out). No I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from dashboard import charts
from reconciler.ops.overview import RunPoint
from reconciler.ops.timerange import TimeRange

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
DAY = TimeRange(NOW - timedelta(days=1), NOW)


def _counts() -> pd.DataFrame:
    rows = [
        (NOW - timedelta(hours=h), source, outcome, n)
        for h in (1, 2)
        for source, outcome, n in (
            ("stripe", "accepted", 5),
            ("stripe", "rejected", 1),
            ("github", "accepted", 3),
            ("github", "mystery", 2),
        )
    ]
    return pd.DataFrame(rows, columns=["time", "source", "outcome", "n"])


def test_counts_stack_one_trace_per_source_and_outcome_coloured_by_source() -> None:
    fig = charts.stacked_counts(_counts(), DAY, "Deliveries by outcome")
    traces = {t.name: t for t in fig.data}
    assert list(traces) == [
        "stripe, accepted",
        "stripe, rejected",
        "github, accepted",
        "github, mystery",
    ]
    assert fig.layout.barmode == "stack" and fig.layout.title.text == "Deliveries by outcome"
    assert list(traces["stripe, accepted"].y) == [5, 5]  # each bucket's count, never summed
    colour = {name: t.marker.color for name, t in traces.items()}
    assert colour["stripe, accepted"] == colour["stripe, rejected"] != colour["github, accepted"]
    shape = {name: t.marker.pattern.shape for name, t in traces.items()}
    assert (shape["stripe, accepted"], shape["stripe, rejected"]) == ("", "\\")
    assert shape["github, mystery"] == "-"  # an outcome without a pattern of its own
    assert "source=github<br>outcome=mystery" in traces["github, mystery"].hovertemplate
    start, end = fig.layout.xaxis.range
    assert pd.Timestamp(start) == DAY.start and pd.Timestamp(end) == DAY.end  # the whole range


def test_an_empty_range_says_so_instead_of_drawing_axes() -> None:
    empty = _counts().iloc[0:0]
    fig = charts.stacked_counts(empty, DAY, "Deliveries by outcome")
    assert not fig.data and fig.layout.annotations[0].text == charts.NO_DATA
    assert fig.layout.xaxis.type == "date"  # the range's times, not -1 to 6
    start, end = fig.layout.xaxis.range
    assert pd.Timestamp(start) == DAY.start and pd.Timestamp(end) == DAY.end
    zeros = _counts().assign(n=0)
    assert not charts.stacked_counts(zeros, DAY, "x").data


def test_discrepancies_per_run_colour_the_kind_in_the_documented_order() -> None:
    runs = [
        RunPoint("r1", "stripe", NOW - timedelta(hours=3), "succeeded", {"dead": 1, "missing": 2}),
        RunPoint("r2", "github", NOW - timedelta(hours=2), "succeeded", {"missing": 4}),
    ]
    fig = charts.discrepancies_per_run(runs, DAY)
    assert [t.name for t in fig.data] == ["missing, stripe", "missing, github", "dead, stripe"]
    shapes = {t.name: t.marker.pattern.shape for t in fig.data}
    assert shapes["missing, stripe"] == "" and shapes["missing, github"] == "/"
    nothing = charts.discrepancies_per_run([RunPoint("r3", "stripe", NOW, "succeeded", {})], DAY)
    assert [a.text for a in nothing.layout.annotations] == [charts.NO_DATA, "1 runs, nothing found"]
