"""The outbox as operators see it: per target now, over time, its success rate and whether it is
paused, a message and its attempts, the messages an event caused; the replay of dead messages and
the pause and resume of a target. Shared by the CLI, ``/metrics`` and the
dashboard; every read is one index range aggregated in SQL."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Float, case, cast, func, select

from reconciler.errors import ActionRefusedError, NoSuchRecordError
from reconciler.ops.overview import BucketCount, raw_counts
from reconciler.ops.timerange import TimeRange
from reconciler.outbox import pauses, store
from reconciler.outbox.pauses import Pause
from reconciler.storage.models import OUTBOX, OUTBOX_ATTEMPTS, OUTBOX_SNAPSHOTS, OutboxStatus
from reconciler.storage.queries import outbox_by_target
from reconciler.storage.sql import bucket_expr, pin_index

LIST_COLUMNS = (
    OUTBOX.c.id,
    OUTBOX.c.target,
    OUTBOX.c.key,
    OUTBOX.c.status,
    OUTBOX.c.attempts,
    OUTBOX.c.created_at,
    OUTBOX.c.sent_at,
    OUTBOX.c.next_attempt_at,
    OUTBOX.c.last_status_code,
    OUTBOX.c.error_class,
    OUTBOX.c.last_error,
    OUTBOX.c.source,
    OUTBOX.c.event_id,
    OUTBOX.c.correlation_id,
)


@dataclass(frozen=True)
class TargetNow:
    target: str
    by_status: dict[str, int]
    oldest_unsent_at: datetime | None

    @property
    def unsent(self) -> int:
        return sum(self.by_status.get(s.value, 0) for s in store.UNSENT)

    def oldest_age_seconds(self, now: datetime) -> float | None:
        if self.oldest_unsent_at is None:
            return None
        return max(0.0, (now - self.oldest_unsent_at).total_seconds())


def targets_now(conn: Connection, targets: Sequence[str] = ()) -> list[TargetNow]:
    """Per target (every configured one, and any other that has messages): messages by status and
    when the oldest unsent one was written."""
    found = outbox_by_target(conn)
    names = list(dict.fromkeys([*targets, *sorted(found)]))
    return [TargetNow(n, found.get(n, ({}, None))[0], found.get(n, ({}, None))[1]) for n in names]


def attempt_counts(
    conn: Connection, rng: TimeRange, width: int, targets: Sequence[str] = ()
) -> list[BucketCount]:
    """Publisher attempts per bucket, target and outcome (sent / failed / dead)."""
    a = OUTBOX_ATTEMPTS
    rows = raw_counts(
        conn,
        a,
        a.c.finished_at,
        a.c.outcome,
        "ix_outbox_attempts_finished_at_target_outcome",
        rng.start,
        rng.end,
        width,
        targets,
        group=a.c.target,
    )
    return [BucketCount(b, t, k, n) for b, t, k, n in rows]


@dataclass(frozen=True)
class SuccessRate:
    """A target's attempts in a range and the share that was sent (a 2xx)."""

    target: str
    sent: int
    attempts: int
    rate: float


def success_rates(
    conn: Connection, rng: TimeRange, targets: Sequence[str]
) -> dict[str, SuccessRate]:
    """Per target, sent ÷ attempts finished in the range, computed in SQL; a target with no
    attempt in the range has no rate (nothing to divide)."""
    if not targets:
        return {}
    a = OUTBOX_ATTEMPTS
    sent = func.sum(case((a.c.outcome == OutboxStatus.SENT, 1), else_=0))
    attempts = func.count()
    stmt = (
        select(a.c.target, sent, attempts, cast(sent, Float) / attempts)
        .where(
            a.c.finished_at >= rng.start,
            a.c.finished_at < rng.end,
            a.c.target.in_(list(targets)),
        )
        .group_by(a.c.target)
    )
    stmt = pin_index(stmt, a, "ix_outbox_attempts_finished_at_target_outcome", conn.dialect)
    return {
        str(t): SuccessRate(str(t), int(s or 0), int(n), float(r or 0.0))
        for t, s, n, r in conn.execute(stmt)
    }


@dataclass(frozen=True)
class UnsentPoint:
    bucket: int
    target: str
    unsent: int  # the bucket's maximum
    oldest_age_seconds: float  # the bucket's maximum


def unsent_series(
    conn: Connection, rng: TimeRange, width: int, targets: Sequence[str]
) -> list[UnsentPoint]:
    """Unsent messages and the oldest one's age over time (the snapshots), a bucket's maximum."""
    if not targets:
        return []
    s = OUTBOX_SNAPSHOTS
    bucket = bucket_expr(s.c.at, width, conn.dialect).label("bucket")
    stmt = (
        select(bucket, s.c.target, func.max(s.c.unsent), func.max(s.c.oldest_age_seconds))
        .where(s.c.target.in_(list(targets)), s.c.at >= rng.start, s.c.at < rng.end)
        .group_by(bucket, s.c.target)
        .order_by(bucket, s.c.target)
    )
    stmt = pin_index(stmt, s, "ix_outbox_snapshots_target_at_values", conn.dialect)
    return [
        UnsentPoint(int(b), str(t), int(n or 0), float(age or 0.0))
        for b, t, n, age in conn.execute(stmt)
    ]


@dataclass(frozen=True)
class OutboxView:
    range: TimeRange
    width: int
    now: datetime
    targets: list[TargetNow]
    attempts: list[BucketCount]
    unsent: list[UnsentPoint]
    failures: dict[str, dict[str, int]] = field(default_factory=dict)
    rates: dict[str, SuccessRate] = field(default_factory=dict)
    paused: dict[str, Pause] = field(default_factory=dict)


def load_outbox(
    conn: Connection, rng: TimeRange, width: int, now: datetime, targets: Sequence[str]
) -> OutboxView:
    """Everything the Outbox page shows."""
    now_by_target = targets_now(conn, targets)
    names = [t.target for t in now_by_target]
    return OutboxView(
        range=rng,
        width=width,
        now=now,
        targets=now_by_target,
        attempts=attempt_counts(conn, rng, width, names),
        unsent=unsent_series(conn, rng, width, names),
        rates=success_rates(conn, rng, names),
        paused=pauses.paused(conn),
    )


def list_messages(
    conn: Connection,
    *,
    targets: Sequence[str] = (),
    statuses: Sequence[str] = (),
    before_id: int | None = None,
    limit: int = 50,
) -> list[dict[str, Any]]:
    """Messages, newest first, a page at a time (keyset: ``before_id`` is the last id shown)."""
    stmt = select(*LIST_COLUMNS).order_by(OUTBOX.c.id.desc()).limit(max(1, min(limit, 1000)))
    if targets:
        stmt = stmt.where(OUTBOX.c.target.in_(list(targets)))
    if statuses:
        stmt = stmt.where(OUTBOX.c.status.in_([OutboxStatus(s) for s in statuses]))
    if before_id is not None:
        stmt = stmt.where(OUTBOX.c.id < before_id)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def count_messages(
    conn: Connection, *, targets: Sequence[str] = (), statuses: Sequence[str] = ()
) -> int:
    stmt = select(func.count()).select_from(OUTBOX)
    if targets:
        stmt = stmt.where(OUTBOX.c.target.in_(list(targets)))
    if statuses:
        stmt = stmt.where(OUTBOX.c.status.in_([OutboxStatus(s) for s in statuses]))
    return int(conn.execute(stmt).scalar_one())


@dataclass(frozen=True)
class MessageDetail:
    message: dict[str, Any]
    attempts: list[dict[str, Any]]


def message_detail(conn: Connection, message_id: int) -> MessageDetail:
    row = conn.execute(select(OUTBOX).where(OUTBOX.c.id == message_id)).first()
    if row is None:
        raise NoSuchRecordError(f"no outbox message {message_id}")
    a = OUTBOX_ATTEMPTS
    attempts = [
        dict(r._mapping)
        for r in conn.execute(
            select(
                a.c.attempt,
                a.c.started_at,
                a.c.finished_at,
                a.c.outcome,
                a.c.error_class,
                a.c.status_code,
                a.c.error,
                a.c.publisher,
            )
            .where(a.c.message_id == message_id)
            .order_by(a.c.id)
        )
    ]
    return MessageDetail(dict(row._mapping), attempts)


def messages_of_event(conn: Connection, source: str, event_id: str) -> list[dict[str, Any]]:
    """The outgoing messages an inbox event's handler wrote."""
    stmt = (
        select(*LIST_COLUMNS)
        .where(OUTBOX.c.source == source, OUTBOX.c.event_id == event_id)
        .order_by(OUTBOX.c.id)
        .limit(100)
    )
    return [dict(r._mapping) for r in conn.execute(stmt)]


def messages_of_correlation(conn: Connection, correlation_id: str) -> list[dict[str, Any]]:
    """The outgoing messages that carry this correlation id."""
    stmt = (
        select(*LIST_COLUMNS)
        .where(OUTBOX.c.correlation_id == correlation_id.strip())
        .order_by(OUTBOX.c.id)
        .limit(100)
    )
    return [dict(r._mapping) for r in conn.execute(stmt)]


def recover(
    engine: Engine, target: str, since: datetime, *, actor: str, reason: str, expected: int
) -> str:
    """Every dead message of a target since a time back to pending with its key (Svix's
    "recover"), the count the operator confirmed: one transaction, one audit entry."""
    why = (reason or "").strip()
    if not why:
        raise ActionRefusedError("a reason is required")
    with engine.begin() as conn:
        n = store.recover_since(conn, target, since, actor=actor, reason=why, expected=expected)
    return f"{n:,} dead message{'s' if n != 1 else ''} of {target} back to pending (same keys)"


def replay(engine: Engine, message_ids: Sequence[int], *, actor: str, reason: str) -> str:
    """Dead (or failed) messages back to pending with their keys: one transaction, audited."""
    why = (reason or "").strip()
    if not why:
        raise ActionRefusedError("a reason is required")
    if not message_ids:
        raise ActionRefusedError("nothing selected")
    with engine.begin() as conn:
        n = store.replay_messages(conn, list(message_ids), actor=actor, reason=why)
    return f"{n} outbox message{'s' if n != 1 else ''} back to pending (same keys)"


def pause(engine: Engine, target: str, *, actor: str, reason: str) -> str:
    """Pause a target (its messages wait, pending): one transaction, audited."""
    with engine.begin() as conn:
        pauses.pause(conn, target, actor=actor, reason=reason)
    return f"outbox target {target} paused: its messages wait until it is resumed"


def resume(engine: Engine, target: str, *, actor: str, reason: str) -> str:
    """Resume a paused target: its waiting messages are due again. One transaction, audited."""
    with engine.begin() as conn:
        was = pauses.resume(conn, target, actor=actor, reason=reason)
    return (
        f"outbox target {target} resumed (paused by {was.paused_by} at "
        f"{was.paused_at.isoformat(timespec='seconds')})"
    )
