"""The queries behind the dashboard's Overview page: time-bucketed counts aggregated in SQL.

Each query reads one index range (see ``docs/benchmarks.md`` for the plans and timings at 1M events
and 3M deliveries): deliveries and processing attempts through their ``(time, source, outcome)``
covering indexes, the live queue through ``(status, next_attempt_at)``, snapshots through
``(source, at, values)``, discrepancies through ``(status, source, kind)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select

from reconciler.ops import rollup
from reconciler.ops.timerange import TimeRange
from reconciler.storage.models import (
    HOURLY_COUNTS,
    INBOX_EVENTS,
    QUEUE_SNAPSHOTS,
    QUEUE_SNAPSHOTS_HOURLY,
    RECON_RUNS,
    EventStatus,
)
from reconciler.storage.queries import (
    dead_lettered_events,
    failures_by_class,
    open_discrepancies,
    waiting_for_a_person,
)
from reconciler.storage.sql import bucket_expr, pin_index
from reconciler.storage.types import as_utc

QUEUE_STATUSES = (EventStatus.PENDING, EventStatus.PROCESSING, EventStatus.FAILED, EventStatus.DEAD)
UNPROCESSED = (EventStatus.PENDING, EventStatus.PROCESSING, EventStatus.FAILED)


@dataclass(frozen=True)
class BucketCount:
    bucket: int  # bucket index: Unix seconds // width
    source: str
    key: str  # delivery outcome or processing outcome
    n: int


@dataclass(frozen=True)
class QueueNow:
    source: str
    by_status: dict[str, int]
    oldest_unprocessed_at: datetime | None

    @property
    def pending(self) -> int:
        return sum(self.by_status.get(s.value, 0) for s in UNPROCESSED)

    @property
    def dead(self) -> int:
        return self.by_status.get(EventStatus.DEAD.value, 0)

    def oldest_age_seconds(self, now: datetime) -> float | None:
        if self.oldest_unprocessed_at is None:
            return None
        return max(0.0, (now - self.oldest_unprocessed_at).total_seconds())


@dataclass(frozen=True)
class SnapshotPoint:
    bucket: int
    source: str
    unprocessed: int  # the bucket's maximum
    oldest_age_seconds: float  # the bucket's maximum


@dataclass(frozen=True)
class RunPoint:
    run_id: str
    source: str
    started_at: datetime
    status: str
    counts: dict[str, int]


def raw_counts(
    conn: Connection,
    table: Any,
    time_col: Any,
    key_col: Any,
    index: str,
    start: datetime,
    end: datetime,
    width: int,
    sources: Sequence[str],
    *,
    group: Any = None,
) -> list[tuple[int, str, str, int]]:
    """Rows per bucket, ``group`` (default: the table's source) and ``key_col`` in ``[start, end)``,
    read through ``index``; ``sources`` narrows the group's values."""
    by = table.c.source if group is None else group
    bucket = bucket_expr(time_col, width, conn.dialect).label("bucket")
    stmt = (
        select(bucket, by, key_col, func.count())
        .where(time_col >= start, time_col < end)
        .group_by(bucket, by, key_col)
    )
    if sources:
        stmt = stmt.where(by.in_(sources))
    stmt = pin_index(stmt, table, index, conn.dialect)
    return [(int(b), str(s), str(k), int(n)) for b, s, k, n in conn.execute(stmt)]


def _rolled_counts(
    conn: Connection, kind: str, start: datetime, end: datetime, width: int, sources: Sequence[str]
) -> list[tuple[int, str, str, int]]:
    h = HOURLY_COUNTS
    bucket = bucket_expr(h.c.hour, width, conn.dialect).label("bucket")
    stmt = (
        select(bucket, h.c.source, h.c.outcome, func.sum(h.c.n))
        .where(h.c.kind == kind, h.c.hour >= start, h.c.hour < end)
        .group_by(bucket, h.c.source, h.c.outcome)
    )
    if sources:
        stmt = stmt.where(h.c.source.in_(sources))
    return [(int(b), str(s), str(k), int(n)) for b, s, k, n in conn.execute(stmt)]


def _bucketed(
    conn: Connection,
    kind: str,
    index: str,
    rng: TimeRange,
    width: int,
    sources: Sequence[str],
) -> list[BucketCount]:
    """Counts per bucket: whole rolled-up hours from ``hourly_counts``, the rest from raw rows."""
    table, time_col, key_col = rollup.KINDS[kind]
    upto = rollup.mark(conn, kind) if width % 3600 == 0 else None
    split = rollup.split_range(rng.start, rng.end, upto)
    parts: list[tuple[int, str, str, int]] = []
    if split.rolled:
        parts += _rolled_counts(conn, kind, *split.rolled, width, sources)
    for start, end in split.raw:
        parts += raw_counts(conn, table, time_col, key_col, index, start, end, width, sources)
    total: dict[tuple[int, str, str], int] = {}
    for b, s, k, n in parts:
        total[(b, s, k)] = total.get((b, s, k), 0) + n
    return [BucketCount(b, s, k, n) for (b, s, k), n in sorted(total.items())]


def delivery_counts(
    conn: Connection, rng: TimeRange, width: int, sources: Sequence[str] = ()
) -> list[BucketCount]:
    """Deliveries per bucket, source and outcome (accepted / duplicate / rejected)."""
    return _bucketed(
        conn, "delivery", "ix_deliveries_received_at_source_outcome", rng, width, sources
    )


def attempt_counts(
    conn: Connection, rng: TimeRange, width: int, sources: Sequence[str] = ()
) -> list[BucketCount]:
    """Processing attempts per bucket, source and outcome (processed / failed / dead / ignored)."""
    return _bucketed(
        conn, "attempt", "ix_processing_attempts_finished_at_source_outcome", rng, width, sources
    )


def queue_now(conn: Connection, sources: Sequence[str] = ()) -> list[QueueNow]:
    """Per source: events waiting by status, dead letters, and since when the oldest unprocessed
    one has been due (received, replayed or retried)."""
    e = INBOX_EVENTS
    stmt = (
        select(e.c.source, e.c.status, func.count(), func.min(e.c.queued_at))
        .where(e.c.status.in_(QUEUE_STATUSES))
        .group_by(e.c.source, e.c.status)
    )
    if sources:
        stmt = stmt.where(e.c.source.in_(sources))
    stmt = pin_index(stmt, e, "ix_inbox_events_status_next_attempt_at", conn.dialect)
    per: dict[str, tuple[dict[str, int], datetime | None]] = {}
    for source, status, n, oldest in conn.execute(stmt):
        counts, first = per.setdefault(str(source), ({}, None))
        counts[str(status)] = int(n)
        at = as_utc(oldest)
        if EventStatus(status) in UNPROCESSED and at is not None and (first is None or at < first):
            first = at
        per[str(source)] = (counts, first)
    return [QueueNow(s, c, o) for s, (c, o) in sorted(per.items())]


def snapshot_series(
    conn: Connection, rng: TimeRange, width: int, sources: Sequence[str]
) -> list[SnapshotPoint]:
    """Queue depth and oldest-unprocessed age over time (the scheduler's snapshots): the maximum of
    each bucket, whole hours from the hourly maxima, the edges from the snapshots themselves."""
    if not sources:
        return []
    q, hq = QUEUE_SNAPSHOTS, QUEUE_SNAPSHOTS_HOURLY
    split = (
        rollup.split_range(rng.start, rng.end, rng.end)
        if width % 3600 == 0
        else rollup.Split(None, ((rng.start, rng.end),))
    )
    parts: list[tuple[int, str, int, float]] = []
    if split.rolled:
        bucket = bucket_expr(hq.c.hour, width, conn.dialect).label("bucket")
        stmt = (
            select(
                bucket,
                hq.c.source,
                func.max(hq.c.max_unprocessed),
                func.max(hq.c.max_oldest_age_seconds),
            )
            .where(
                hq.c.source.in_(sources), hq.c.hour >= split.rolled[0], hq.c.hour < split.rolled[1]
            )
            .group_by(bucket, hq.c.source)
        )
        parts += [
            (int(b), str(s), int(n or 0), float(a or 0.0)) for b, s, n, a in conn.execute(stmt)
        ]
    for start, end in split.raw:
        bucket = bucket_expr(q.c.at, width, conn.dialect).label("bucket")
        stmt = (
            select(bucket, q.c.source, func.max(q.c.unprocessed), func.max(q.c.oldest_age_seconds))
            .where(q.c.source.in_(sources), q.c.at >= start, q.c.at < end)
            .group_by(bucket, q.c.source)
        )
        stmt = pin_index(stmt, q, "ix_queue_snapshots_source_at_values", conn.dialect)
        parts += [
            (int(b), str(s), int(n or 0), float(a or 0.0)) for b, s, n, a in conn.execute(stmt)
        ]
    best: dict[tuple[int, str], tuple[int, float]] = {}
    for b, s, n, a in parts:
        old = best.get((b, s))
        best[(b, s)] = (n, a) if old is None else (max(old[0], n), max(old[1], a))
    return [SnapshotPoint(b, s, n, a) for (b, s), (n, a) in sorted(best.items())]


def run_points(
    conn: Connection, rng: TimeRange, sources: Sequence[str], limit: int = 500
) -> list[RunPoint]:
    """Finished reconciliation runs in the range with their counts by kind (newest ``limit``)."""
    r = RECON_RUNS
    if not sources:
        return []
    stmt = (
        select(r.c.run_id, r.c.source, r.c.started_at, r.c.status, r.c.counts)
        .where(r.c.source.in_(sources), r.c.started_at >= rng.start, r.c.started_at < rng.end)
        .order_by(r.c.started_at.desc())
        .limit(limit)
    )
    rows = [
        RunPoint(
            str(run_id),
            str(source),
            started,
            str(status),
            {str(k): int(v) for k, v in (counts or {}).items() if isinstance(v, int)},
        )
        for run_id, source, started, status, counts in conn.execute(stmt)
    ]
    return rows[::-1]


@dataclass(frozen=True)
class Overview:
    range: TimeRange
    width: int
    now: datetime
    sources: tuple[str, ...]
    deliveries: list[BucketCount]
    attempts: list[BucketCount]
    queue: list[QueueNow]
    snapshots: list[SnapshotPoint]
    discrepancies: dict[str, dict[str, int]]
    runs: list[RunPoint]
    failures: dict[str, dict[str, int]] = field(default_factory=dict)  # in range, by error class
    waiting: dict[str, dict[str, int]] = field(default_factory=dict)  # dead now, by error class
    dead_lettered: dict[str, int] = field(default_factory=dict)  # distinct events, in range


def load_overview(
    conn: Connection, rng: TimeRange, width: int, now: datetime, sources: Sequence[str]
) -> Overview:
    """Everything Overview shows, for the given sources (all configured sources by default)."""
    srcs = tuple(sources)
    return Overview(
        range=rng,
        width=width,
        now=now,
        sources=srcs,
        deliveries=delivery_counts(conn, rng, width, srcs),
        attempts=attempt_counts(conn, rng, width, srcs),
        queue=queue_now(conn, srcs),
        snapshots=snapshot_series(conn, rng, width, srcs),
        discrepancies=open_discrepancies(conn, srcs),
        runs=run_points(conn, rng, srcs),
        failures=failures_by_class(conn, rng.start, rng.end, srcs),
        waiting=waiting_for_a_person(conn, srcs),
        dead_lettered=dead_lettered_events(conn, rng.start, rng.end, srcs),
    )


@dataclass
class SourceKpis:
    source: str
    accepted: int = 0
    duplicate: int = 0
    conflict: int = 0  # redeliveries with other content: flagged, not applied
    rejected: int = 0
    processed: int = 0
    failed: int = 0
    dead: int = 0  # attempts that dead-lettered an event in the range
    dead_lettered: int = 0  # distinct events dead-lettered in the range
    pending_now: int = 0
    dead_now: int = 0
    oldest_age_seconds: float | None = None
    stuck: bool = False
    open_discrepancies: dict[str, int] = field(default_factory=dict)
    failures_by_class: dict[str, int] = field(default_factory=dict)  # failed attempts in range
    waiting_for_a_person: dict[str, int] = field(default_factory=dict)  # dead now, by class

    @property
    def attempts(self) -> int:
        return self.processed + self.failed + self.dead

    def failure_share(self, error_class: str) -> float:
        """The share of the range's attempts that failed with this class (0 without attempts)."""
        return self.failures_by_class.get(error_class, 0) / self.attempts if self.attempts else 0.0

    @property
    def has_data(self) -> bool:
        return bool(
            self.accepted
            or self.duplicate
            or self.conflict
            or self.rejected
            or self.processed
            or self.failed
            or self.dead
            or self.pending_now
            or self.dead_now
            or self.open_discrepancies
        )


def kpis(ov: Overview, stuck_after_seconds: float) -> list[SourceKpis]:
    """Per-source KPI totals (pure: sums of the bucketed counts and the live queue)."""
    names = list(ov.sources)
    for extra in sorted(
        {c.source for c in ov.deliveries}
        | {c.source for c in ov.attempts}
        | {q.source for q in ov.queue}
        | set(ov.discrepancies)
    ):
        if extra not in names:
            names.append(extra)
    out = {name: SourceKpis(name) for name in names}
    for c in ov.deliveries:
        k = out[c.source]
        if c.key in ("accepted", "duplicate", "conflict", "rejected"):
            setattr(k, c.key, getattr(k, c.key) + c.n)
    for c in ov.attempts:
        k = out[c.source]
        key = "failed" if c.key == "interrupted" else c.key  # (it never came back: it failed)
        if key in ("processed", "failed", "dead"):
            setattr(k, key, getattr(k, key) + c.n)
    for source, n in ov.dead_lettered.items():
        if source in out:
            out[source].dead_lettered = n
    for q in ov.queue:
        k = out[q.source]
        k.pending_now = q.pending
        k.dead_now = q.dead
        k.oldest_age_seconds = q.oldest_age_seconds(ov.now)
        k.stuck = k.oldest_age_seconds is not None and k.oldest_age_seconds > stuck_after_seconds
    for source, by_kind in ov.discrepancies.items():
        out[source].open_discrepancies = dict(sorted(by_kind.items()))
    for source, classes in ov.failures.items():
        if source in out:
            out[source].failures_by_class = dict(sorted(classes.items()))
    for source, classes in ov.waiting.items():
        if source in out:
            out[source].waiting_for_a_person = dict(sorted(classes.items()))
    return list(out.values())
