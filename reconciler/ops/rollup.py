"""Hourly rollups of deliveries, processing attempts and queue snapshots, and exact reads over them.

Counting every raw row of a 7-day range costs per row (bucket arithmetic and grouping), however good
the index. So the scheduler rolls closed hours up into ``hourly_counts`` (incrementally, from the
mark in ``rollup_marks``, a bounded chunk per transaction), and the snapshot job keeps hourly maxima
as it records. A read splits its range: whole hours before the mark come from the rollup, the edges
and everything after the mark from the raw rows, so the figures are the same as a raw count.

Raw rows are stamped when they are written (``received_at``, ``finished_at``); the mark stays
``margin`` behind now so a transaction still open at the boundary is never skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, func, literal, select, update

from reconciler.storage.dialect import greatest, insert_for, locks_rows
from reconciler.storage.models import (
    DELIVERIES,
    HOURLY_COUNTS,
    PROCESSING_ATTEMPTS,
    QUEUE_SNAPSHOTS_HOURLY,
    ROLLUP_MARKS,
)
from reconciler.storage.sql import hour_expr
from reconciler.storage.types import as_utc

HOUR = timedelta(hours=1)
MARGIN = timedelta(minutes=5)
CHUNK = timedelta(days=2)  # hours rolled up per transaction
# kind -> (table, time column, outcome column)
KINDS: dict[str, tuple[Any, Any, Any]] = {
    "delivery": (DELIVERIES, DELIVERIES.c.received_at, DELIVERIES.c.outcome),
    "attempt": (
        PROCESSING_ATTEMPTS,
        PROCESSING_ATTEMPTS.c.finished_at,
        PROCESSING_ATTEMPTS.c.outcome,
    ),
}


def floor_hour(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def ceil_hour(at: datetime) -> datetime:
    f = floor_hour(at)
    return f if f == at else f + HOUR


@dataclass(frozen=True)
class Split:
    """How a range is read: ``rolled`` whole hours from the rollup, ``raw`` ranges from the rows."""

    rolled: tuple[datetime, datetime] | None
    raw: tuple[tuple[datetime, datetime], ...]


def split_range(start: datetime, end: datetime, upto: datetime | None) -> Split:
    """Pure: the whole hours of ``[start, end)`` before ``upto`` go to the rollup, the rest raw."""
    if upto is None:
        return Split(None, ((start, end),))
    h0 = ceil_hour(start)
    h1 = min(floor_hour(end), floor_hour(upto))
    if h0 >= h1:
        return Split(None, ((start, end),))
    raw = tuple((a, b) for a, b in ((start, h0), (h1, end)) if a < b)
    return Split((h0, h1), raw)


def mark(conn: Connection, kind: str) -> datetime | None:
    return as_utc(
        conn.execute(select(ROLLUP_MARKS.c.upto).where(ROLLUP_MARKS.c.kind == kind)).scalar()
    )


def _roll_chunk(conn: Connection, kind: str, now: datetime) -> bool:
    """Roll up at most one chunk of closed hours of ``kind``; True if there may be more to do."""
    table, tcol, ocol = KINDS[kind]
    target = floor_hour(now - MARGIN)
    q = select(ROLLUP_MARKS.c.upto).where(ROLLUP_MARKS.c.kind == kind)
    if locks_rows(conn):
        q = q.with_for_update()  # two schedulers: the second waits, then sees the moved mark
    upto = as_utc(conn.execute(q).scalar())
    if upto is None:
        first = as_utc(conn.execute(select(func.min(tcol))).scalar())
        start = floor_hour(first) if first else target
        ins = insert_for(conn, ROLLUP_MARKS).values(kind=kind, upto=start)
        conn.execute(ins.on_conflict_do_nothing(index_elements=["kind"]))
        upto = as_utc(conn.execute(q).scalar())
        assert upto is not None
    if upto >= target:
        return False
    end = min(target, upto + CHUNK)
    hour = hour_expr(tcol, conn.dialect)
    rows = (
        select(literal(kind), hour, table.c.source, ocol, func.count())
        .where(tcol >= upto, tcol < end)
        .group_by(hour, table.c.source, ocol)
    )
    h = HOURLY_COUNTS
    ins = insert_for(conn, h).from_select(["kind", "hour", "source", "outcome", "n"], rows)
    conn.execute(
        ins.on_conflict_do_update(
            index_elements=["kind", "hour", "source", "outcome"], set_={"n": h.c.n + ins.excluded.n}
        )
    )
    conn.execute(update(ROLLUP_MARKS).where(ROLLUP_MARKS.c.kind == kind).values(upto=end))
    return end < target


def roll_up(engine: Engine, now: datetime) -> int:
    """Bring every rollup up to ``now - MARGIN``; one transaction per chunk. Returns chunks done."""
    chunks = 0
    for kind in KINDS:
        more = True
        while more:
            with engine.begin() as conn:
                more = _roll_chunk(conn, kind, now)
            chunks += 1
    return chunks


def record_snapshot_hourly(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Fold new snapshots into the hourly maxima (called with the snapshots, same transaction)."""
    if not rows:
        return
    t = QUEUE_SNAPSHOTS_HOURLY
    # one row per (source, hour) per statement: PostgreSQL refuses to update a row twice in one upsert
    folded: dict[tuple[str, datetime], tuple[int, float]] = {}
    for r in rows:
        key = (r["source"], floor_hour(r["at"]))
        n, age = folded.get(key, (r["unprocessed"], r["oldest_age_seconds"]))
        folded[key] = (max(n, r["unprocessed"]), max(age, r["oldest_age_seconds"]))
    values = [
        {"source": s, "hour": h, "max_unprocessed": n, "max_oldest_age_seconds": a}
        for (s, h), (n, a) in folded.items()
    ]
    ins = insert_for(conn, t).values(values)
    conn.execute(
        ins.on_conflict_do_update(
            index_elements=["source", "hour"],
            set_={
                "max_unprocessed": greatest(
                    conn.dialect, t.c.max_unprocessed, ins.excluded.max_unprocessed
                ),
                "max_oldest_age_seconds": greatest(
                    conn.dialect, t.c.max_oldest_age_seconds, ins.excluded.max_oldest_age_seconds
                ),
            },
        )
    )
