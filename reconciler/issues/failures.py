"""Where each kind of failure is read from, a page at a time, in the order it happened: dead
attempts of inbox events, failed outbox attempts, failed reconciliation runs, open discrepancies.

Each reader is a keyset scan on (time, row id) over an indexed time column, so a refresh reads what
is new since its mark and never a whole table; the rows come back as :class:`Failure` values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, literal, or_, select

from reconciler.kinds import kinds
from reconciler.states import (
    OUTBOX_SOURCE_PREFIX,
    AttemptOutcome,
    DiscrepancyStatus,
    IssueKind,
    OutboxStatus,
    RunStatus,
)
from reconciler.storage.models import (
    DISCREPANCIES,
    INBOX_EVENTS,
    OUTBOX,
    OUTBOX_ATTEMPTS,
    PROCESSING_ATTEMPTS,
    RECON_RUNS,
)
from reconciler.storage.types import as_utc

Position = tuple[datetime, int]  # (time, row id) of the last failure read


@dataclass(frozen=True)
class Failure:
    """One failing row, as an issue counts it."""

    ref: int  # the failing row's id (unique per kind: a member of one issue)
    at: datetime  # when it failed
    item_id: int  # what failed: the event's, message's, run's or discrepancy's row id
    item: str  # and its name: event id, message key, run id, record key
    source: str
    type: str | None
    error: str | None
    seen: datetime | None = None  # the time the scan is keyed on, when it is not ``at``

    @property
    def position(self) -> Position:
        return (self.seen or self.at, self.ref)


def _after(time_col: Any, id_col: Any, position: Position) -> Any:
    at, last = position
    return or_(time_col > at, and_(time_col == at, id_col > last))


def dead_events(conn: Connection, position: Position, limit: int) -> list[Failure]:
    a, e = PROCESSING_ATTEMPTS, INBOX_EVENTS
    stmt = (
        select(a.c.id, a.c.finished_at, e.c.id, e.c.event_id, a.c.source, e.c.event_type, a.c.error)
        .join(e, e.c.id == a.c.inbox_event_id)
        .where(a.c.outcome == AttemptOutcome.DEAD, _after(a.c.finished_at, a.c.id, position))
        .order_by(a.c.finished_at, a.c.id)
        .limit(limit)
    )
    return [Failure(*row) for row in conn.execute(stmt)]


def outbox_failures(conn: Connection, position: Position, limit: int) -> list[Failure]:
    """Each failed attempt at a target (retried or given up): a target that fails is an issue
    while it fails, whether or not the retries get through later."""
    a, m = OUTBOX_ATTEMPTS, OUTBOX
    stmt = (
        select(
            a.c.id.label("ref"),
            a.c.finished_at,
            m.c.id.label("item_id"),
            m.c.key,
            (literal(OUTBOX_SOURCE_PREFIX) + a.c.target).label("source"),
            a.c.error,
            a.c.status_code,
        )
        .join(m, m.c.id == a.c.message_id)
        .where(
            a.c.outcome.in_([OutboxStatus.FAILED, OutboxStatus.DEAD]),
            _after(a.c.finished_at, a.c.id, position),
        )
        .order_by(a.c.finished_at, a.c.id)
        .limit(limit)
    )
    return [
        Failure(
            row.ref,
            row.finished_at,
            row.item_id,
            row.key,
            row.source,
            None,
            row.error or (f"HTTP {row.status_code}" if row.status_code else None),
        )
        for row in conn.execute(stmt)
    ]


def failed_runs(conn: Connection, position: Position, limit: int) -> list[Failure]:
    r = RECON_RUNS
    stmt = (
        select(r.c.id, r.c.finished_at, r.c.id, r.c.run_id, r.c.source, r.c.error)
        .where(
            r.c.status == RunStatus.FAILED,
            r.c.finished_at.is_not(None),
            _after(r.c.finished_at, r.c.id, position),
        )
        .order_by(r.c.finished_at, r.c.id)
        .limit(limit)
    )
    # the trigger is no part of the group: a cause fails scheduled and manual runs alike
    rows = conn.execute(stmt).all()
    return [Failure(i, at, item_id, run, src, None, err) for i, at, item_id, run, src, err in rows]


# dead events and dead outbox messages are issues of their own kinds: not counted twice
_NOT_GROUPED = kinds(own_issue=True)


def open_discrepancies(conn: Connection, position: Position, limit: int) -> list[Failure]:
    """Open discrepancies seen since the mark, grouped by source, kind and cause (a rerun that
    sees one again reads it again; it stays one member)."""
    d = DISCREPANCIES
    stmt = (
        select(
            d.c.id,
            d.c.last_seen_at,
            d.c.first_seen_at,
            d.c.record_key,
            d.c.source,
            d.c.kind,
            d.c.cause,
        )
        .where(
            d.c.status == DiscrepancyStatus.OPEN,
            d.c.kind.not_in(_NOT_GROUPED),
            _after(d.c.last_seen_at, d.c.id, position),
        )
        .order_by(d.c.last_seen_at, d.c.id)
        .limit(limit)
    )
    return [
        # (the position is the time it was seen; the member keeps when it first appeared)
        Failure(i, as_utc(first) or seen, i, key, src, str(kind), cause or str(kind), seen)
        for i, seen, first, key, src, kind, cause in conn.execute(stmt)
    ]


Reader = Callable[[Connection, Position, int], list[Failure]]

READERS: dict[IssueKind, Reader] = {
    IssueKind.DEAD_EVENT: dead_events,
    IssueKind.OUTBOX_FAILURE: outbox_failures,
    IssueKind.RECONCILE_FAILURE: failed_runs,
    IssueKind.DISCREPANCY: open_discrepancies,
}
