"""Claiming due events: one UPDATE ... RETURNING per status, an ordered range scan of
``ix_inbox_events_status_next_attempt_at``; PostgreSQL adds ``FOR UPDATE SKIP LOCKED`` so that
concurrent workers never claim the same row (SQLite serialises writers). The claim sets
``next_attempt_at`` to the lease's expiry: an event whose worker died is due again when its lease
runs out. An event taken back from ``processing`` whose attempt had started gets that attempt
recorded as ``interrupted`` (:func:`record_interrupted`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, case, insert, select, update

from reconciler.inbox.handlers import Event
from reconciler.storage.dialect import skips_locked_rows
from reconciler.storage.models import INBOX_EVENTS as EVENTS
from reconciler.storage.models import PROCESSING_ATTEMPTS as ATTEMPTS
from reconciler.storage.models import AttemptOutcome, EventStatus


def event_of(r: Any) -> Event:
    """An inbox row (with at least the columns a claim returns) as the handler's value."""
    return Event(
        id=r.id,
        source=r.source,
        event_id=r.event_id,
        event_type=r.event_type,
        object_type=r.object_type,
        object_id=r.object_id,
        occurred_at=r.occurred_at,
        body=r.body,
        content_type=r.content_type,
        headers=r.headers or {},
        attempt=r.attempts,
        correlation_id=r.correlation_id,
        origin=str(r.origin),
        error_class=str(r.error_class) if r.error_class else None,
        replay=r.replays,
        hangs=r.hangs,
    )


CLAIM_ORDER = (EventStatus.PROCESSING, EventStatus.FAILED, EventStatus.PENDING)


def claim_batch(
    conn: Connection, now: datetime, lease_until: datetime, limit: int, worker_id: str
) -> tuple[list[Event], set[int]]:
    """Up to ``limit`` due events leased to ``worker_id``: expired leases first, then due retries,
    then new events; and the ids of those claimed after their lease ran out (their worker died or
    hung: their last attempt may have been the last allowed)."""
    claimed: list[Event] = []
    expired: set[int] = set()
    for status in CLAIM_ORDER:
        if len(claimed) >= limit:
            break
        events = claim_due(conn, status, now, lease_until, limit - len(claimed), worker_id)
        if status is EventStatus.PROCESSING:
            expired.update(e.id for e in events)
        claimed += events
    return claimed, expired


def claim_due(
    conn: Connection,
    status: EventStatus,
    now: datetime,
    lease_until: datetime,
    limit: int,
    worker_id: str,
) -> list[Event]:
    """Up to ``limit`` events of this status that are due, leased to ``worker_id``, in id order.
    An event claimed from ``processing`` had its lease run out: its attempt never came back (the
    worker died, or hung with no supervisor left to abandon it), counted in ``hangs``."""
    due = (
        select(EVENTS.c.id)
        .where(EVENTS.c.status == status, EVENTS.c.next_attempt_at <= now)
        .order_by(EVENTS.c.next_attempt_at)
        .limit(limit)
    )
    if skips_locked_rows(conn):
        due = due.with_for_update(skip_locked=True)
    if status is EventStatus.PROCESSING:
        # the run-out leases are read first: whose attempt never came back is overwritten below
        ids = record_interrupted(conn, due, now)
        if not ids:
            return []
        chosen = EVENTS.c.id.in_(ids)
    else:
        chosen = EVENTS.c.id.in_(due.scalar_subquery())
    # only an attempt that had started hung: the rest of its batch did not
    hung = case((EVENTS.c.attempt_started_at.is_not(None), 1), else_=0)
    stmt = (
        update(EVENTS)
        .where(chosen)
        .values(
            status=EventStatus.PROCESSING,
            lease_owner=worker_id,
            lease_expires_at=lease_until,
            next_attempt_at=lease_until,
            hangs=EVENTS.c.hangs + hung if status is EventStatus.PROCESSING else EVENTS.c.hangs,
            attempt_started_at=None,
        )
        .returning(
            EVENTS.c.id,
            EVENTS.c.source,
            EVENTS.c.event_id,
            EVENTS.c.event_type,
            EVENTS.c.object_type,
            EVENTS.c.object_id,
            EVENTS.c.occurred_at,
            EVENTS.c.body,
            EVENTS.c.content_type,
            EVENTS.c.headers,
            EVENTS.c.attempts,
            EVENTS.c.correlation_id,
            EVENTS.c.origin,
            EVENTS.c.error_class,
            EVENTS.c.replays,
            EVENTS.c.hangs,
        )
    )
    events = [event_of(r) for r in conn.execute(stmt)]
    events.sort(key=lambda e: e.id)
    return events


def record_interrupted(conn: Connection, due: Select[tuple[int]], now: datetime) -> list[int]:
    """The ids ``due`` selects (events whose lease ran out); each that had an attempt running gets
    that attempt recorded as ``interrupted``: its worker was killed (or hung with no supervisor
    left), so nothing else would ever write its row."""
    rows = conn.execute(
        due.add_columns(
            EVENTS.c.source,
            EVENTS.c.attempts,
            EVENTS.c.lease_owner,
            EVENTS.c.attempt_started_at,
        )
    ).all()
    started = [r for r in rows if r.attempt_started_at is not None]
    if started:
        conn.execute(
            insert(ATTEMPTS),
            [
                {
                    "inbox_event_id": r.id,
                    "source": r.source,
                    "attempt": r.attempts,
                    "worker": str(r.lease_owner or "unknown")[:128],
                    "started_at": r.attempt_started_at,
                    "finished_at": now,
                    "outcome": AttemptOutcome.INTERRUPTED,
                    "error_class": None,
                    "error": f"interrupted: the lease of {r.lease_owner} ran out while the "
                    "attempt ran (its worker was killed, or hung with no supervisor left)",
                }
                for r in started
            ],
        )
    return [r.id for r in rows]


def release_unstarted(
    conn: Connection, ids: list[int], owner: str, now: datetime, given_back: int = 0
) -> None:
    """Claimed events not started give their lease back (a worker shutting down): due now, with
    ``given_back`` attempts fewer (a start counted ahead, ``inbox.attempts``), where ``owner`` still
    holds them."""
    if not ids:
        return
    conn.execute(
        update(EVENTS)
        .where(
            EVENTS.c.id.in_(ids),
            EVENTS.c.lease_owner == owner,
            EVENTS.c.status == EventStatus.PROCESSING,
        )
        .values(
            status=EventStatus.PENDING,
            lease_owner=None,
            lease_expires_at=None,
            next_attempt_at=now,
            attempts=EVENTS.c.attempts - given_back,
            attempt_started_at=None,
        )
    )
