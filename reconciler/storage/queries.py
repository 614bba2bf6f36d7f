"""Small read queries shared by floors that must not import each other (the receiver's metrics and
the dashboard's overview)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import Connection, func, select

from reconciler.states import OUTBOX_UNSENT
from reconciler.storage.dialect import insert_for
from reconciler.storage.models import (
    DISCREPANCIES,
    INBOX_EVENTS,
    NOTIFY_TARGETS,
    OUTBOX,
    OUTBOX_ATTEMPTS,
    PROCESSING_ATTEMPTS,
    AttemptOutcome,
    DiscrepancyStatus,
    EventStatus,
    OutboxStatus,
)
from reconciler.storage.sql import pin_index
from reconciler.storage.types import as_utc


def open_discrepancies(conn: Connection, sources: Sequence[str] = ()) -> dict[str, dict[str, int]]:
    """Open discrepancies per source and kind."""
    d = DISCREPANCIES
    stmt = (
        select(d.c.source, d.c.kind, func.count())
        .where(d.c.status == DiscrepancyStatus.OPEN)
        .group_by(d.c.source, d.c.kind)
    )
    if sources:
        stmt = stmt.where(d.c.source.in_(sources))
    stmt = pin_index(stmt, d, "ix_discrepancies_status_source_kind", conn.dialect)
    out: dict[str, dict[str, int]] = {}
    for source, kind, n in conn.execute(stmt):
        out.setdefault(str(source), {})[str(kind)] = int(n)
    return out


def failures_by_class(
    conn: Connection, start: datetime, end: datetime, sources: Sequence[str] = ()
) -> dict[str, dict[str, int]]:
    """Processing attempts that failed (retry due or dead) in ``[start, end)``, per source and error
    class (transient / ambiguous / permanent). The time index narrows the rows; only failures are
    read from the table."""
    a = PROCESSING_ATTEMPTS
    stmt = (
        select(a.c.source, a.c.error_class, func.count())
        .where(
            a.c.finished_at >= start,
            a.c.finished_at < end,
            a.c.outcome.in_((EventStatus.FAILED, EventStatus.DEAD, AttemptOutcome.INTERRUPTED)),
        )
        .group_by(a.c.source, a.c.error_class)
    )
    if sources:
        stmt = stmt.where(a.c.source.in_(sources))
    out: dict[str, dict[str, int]] = {}
    for source, error_class, n in conn.execute(stmt):
        out.setdefault(str(source), {})[str(error_class or "transient")] = int(n)
    return out


def dead_lettered_events(
    conn: Connection, start: datetime, end: datetime, sources: Sequence[str] = ()
) -> dict[str, int]:
    """Events dead-lettered in ``[start, end)`` per source: distinct events, so one replayed and
    dead-lettered again counts once."""
    a = PROCESSING_ATTEMPTS
    stmt = (
        select(a.c.source, func.count(a.c.inbox_event_id.distinct()))
        .where(a.c.finished_at >= start, a.c.finished_at < end, a.c.outcome == EventStatus.DEAD)
        .group_by(a.c.source)
    )
    if sources:
        stmt = stmt.where(a.c.source.in_(sources))
    return {str(source): int(n) for source, n in conn.execute(stmt)}


def waiting_for_a_person(
    conn: Connection, sources: Sequence[str] = ()
) -> dict[str, dict[str, int]]:
    """Dead events per source and error class: nothing retries them; a person must (an
    ``ambiguous`` one: find out whether its effect happened, then replay or resolve)."""
    e = INBOX_EVENTS
    stmt = (
        select(e.c.source, e.c.error_class, func.count())
        .where(e.c.status == EventStatus.DEAD)
        .group_by(e.c.source, e.c.error_class)
    )
    if sources:
        stmt = stmt.where(e.c.source.in_(sources))
    out: dict[str, dict[str, int]] = {}
    for source, error_class, n in conn.execute(stmt):
        out.setdefault(str(source), {})[str(error_class or "unknown")] = int(n)
    return out


def outbox_by_target(conn: Connection) -> dict[str, tuple[dict[str, int], datetime | None]]:
    """Per outbox target: messages by status, and since when the oldest unsent one has been due
    (written or replayed)."""
    o = OUTBOX
    stmt = select(o.c.target, o.c.status, func.count(), func.min(o.c.queued_at)).group_by(
        o.c.target, o.c.status
    )
    out: dict[str, tuple[dict[str, int], datetime | None]] = {}
    for target, status, n, oldest in conn.execute(stmt):
        counts, first = out.get(str(target), ({}, None))
        counts[str(status)] = int(n)
        at = as_utc(oldest)
        if (
            OutboxStatus(status) in OUTBOX_UNSENT
            and at is not None
            and (first is None or at < first)
        ):
            first = at
        out[str(target)] = (counts, first)
    return out


def outbox_failures(conn: Connection, start: datetime, end: datetime) -> dict[str, dict[str, int]]:
    """Publisher attempts that failed (retry due or dead) in ``[start, end)``, per target and error
    class."""
    a = OUTBOX_ATTEMPTS
    stmt = (
        select(a.c.target, a.c.error_class, func.count())
        .where(
            a.c.finished_at >= start,
            a.c.finished_at < end,
            a.c.outcome.in_((OutboxStatus.FAILED, OutboxStatus.DEAD)),
        )
        .group_by(a.c.target, a.c.error_class)
    )
    out: dict[str, dict[str, int]] = {}
    for target, error_class, n in conn.execute(stmt):
        out.setdefault(str(target), {})[str(error_class or "transient")] = int(n)
    return out


def register_notify_targets(conn: Connection, targets: Iterable[str], now: datetime) -> None:
    """``[[notify]]`` targets not seen before are first seen now (one statement; known ones keep
    their time): a target hears about what happened after it was first seen."""
    rows = [{"target": t, "since": now} for t in targets]
    if rows:
        conn.execute(
            insert_for(conn, NOTIFY_TARGETS).on_conflict_do_nothing(index_elements=["target"]),
            rows,
        )
