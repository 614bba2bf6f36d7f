"""Inbox actions and queries shared by the CLI, the scheduler and the dashboard.

Functions take a ``Connection`` in the caller's transaction and return values, never ORM objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, update

from reconciler.audit import record_audit
from reconciler.errors import ActionRefusedError, NoSuchRecordError
from reconciler.storage.models import (
    AUDIT_LOG,
    DELIVERIES,
    INBOX_EVENTS,
    OUTBOX,
    PROCESSING_ATTEMPTS,
    EventStatus,
)
from reconciler.storage.types import utcnow

EVENTS = INBOX_EVENTS
REPLAYABLE = (EventStatus.FAILED, EventStatus.DEAD, EventStatus.PROCESSED, EventStatus.IGNORED)


def requeued(*, new_round: bool = False) -> dict[str, Any]:
    """The columns that put an event back to pending as if new: due now (its queue age counts
    from now), attempts and hangs from zero. ``new_round``: the event was applied (processed,
    ignored) or its body replaced, and the operator wants it applied again: a new replay round,
    whose applied mark is its own (``inbox.applied``). A failed or dead event stays in its round:
    its business writes, if an attempt committed them, are not applied twice."""
    now = utcnow()
    return {
        **({"replays": EVENTS.c.replays + 1} if new_round else {}),
        "hangs": 0,
        "status": EventStatus.PENDING,
        "attempts": 0,
        "next_attempt_at": now,
        "queued_at": now,
        "lease_owner": None,
        "lease_expires_at": None,
        "attempt_started_at": None,
        "processed_at": None,
        "error_class": None,
        "last_error": None,
    }


@dataclass(frozen=True)
class ReplayResult:
    source: str
    event_id: str
    previous_status: str


def replay_event(
    conn: Connection, *, source: str, event_id: str, actor: str, reason: str | None = None
) -> ReplayResult:
    """Put a failed, dead, processed or ignored event back to pending with the SAME event id."""
    row = conn.execute(
        select(EVENTS.c.id, EVENTS.c.status, EVENTS.c.attempts, EVENTS.c.origin).where(
            EVENTS.c.source == source, EVENTS.c.event_id == event_id
        )
    ).first()
    if row is None:
        raise NoSuchRecordError(f"no event '{event_id}' from source '{source}' in the inbox")
    status = EventStatus(row.status)
    if status not in REPLAYABLE:
        raise ActionRefusedError(
            f"event '{event_id}' from source '{source}' is {status.value}: only "
            f"{', '.join(s.value for s in REPLAYABLE)} events can be replayed"
        )
    result = conn.execute(
        update(EVENTS)
        .where(EVENTS.c.id == row.id, EVENTS.c.status == status)
        # The origin stays that of the first receipt: orphan detection reads it, and a forged
        # webhook must stay a webhook after an operator replays it. The audit log has the replay.
        # A new replay round: the handler's applied mark is per round, so it runs again.
        .values(**requeued(new_round=status in (EventStatus.PROCESSED, EventStatus.IGNORED)))
    )
    if result.rowcount != 1:
        raise ActionRefusedError(f"event '{event_id}' changed while replaying it; try again")
    record_audit(
        conn,
        actor=actor,
        action="replay",
        source=source,
        event_id=event_id,
        reason=reason,
        detail={
            "previous_status": status.value,
            "previous_attempts": row.attempts,
            "previous_origin": str(row.origin),
        },
    )
    return ReplayResult(source, event_id, status.value)


@dataclass(frozen=True)
class EventDetail:
    event: dict[str, Any]
    deliveries: list[dict[str, Any]]
    attempts: list[dict[str, Any]]
    audit: list[dict[str, Any]]
    messages: list[dict[str, Any]] = field(default_factory=list)  # outgoing, its handler wrote


def _rows(conn: Connection, stmt: Any) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in conn.execute(stmt)]


def event_detail(conn: Connection, *, source: str, event_id: str) -> EventDetail:
    event = conn.execute(
        select(EVENTS).where(EVENTS.c.source == source, EVENTS.c.event_id == event_id)
    ).first()
    if event is None:
        raise NoSuchRecordError(f"no event '{event_id}' from source '{source}' in the inbox")
    d = DELIVERIES
    a = PROCESSING_ATTEMPTS
    log = AUDIT_LOG
    o = OUTBOX
    return EventDetail(
        event=dict(event._mapping),
        deliveries=_rows(
            conn,
            select(
                d.c.received_at,
                d.c.outcome,
                d.c.status_code,
                d.c.reason,
                d.c.delivery_id,
                d.c.remote_addr,
            )
            .where(d.c.source == source, d.c.event_id == event_id)
            .order_by(d.c.received_at, d.c.id),
        ),
        attempts=_rows(
            conn,
            select(
                a.c.attempt,
                a.c.started_at,
                a.c.finished_at,
                a.c.outcome,
                a.c.error_class,
                a.c.error,
                a.c.worker,
            )
            .where(a.c.inbox_event_id == event.id)
            .order_by(a.c.id),
        ),
        audit=_rows(
            conn,
            select(log.c.at, log.c.actor, log.c.action, log.c.reason, log.c.detail)
            .where(log.c.source == source, log.c.event_id == event_id)
            .order_by(log.c.at, log.c.id),
        ),
        messages=_rows(
            conn,
            select(
                o.c.id,
                o.c.target,
                o.c.key,
                o.c.status,
                o.c.attempts,
                o.c.created_at,
                o.c.sent_at,
                o.c.last_status_code,
                o.c.error_class,
                o.c.last_error,
            )
            .where(o.c.source == source, o.c.event_id == event_id)
            .order_by(o.c.id)
            .limit(100),
        ),
    )


def isoformat(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
