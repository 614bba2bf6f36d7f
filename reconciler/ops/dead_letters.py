"""Dead-lettered events grouped for triage, and replaying a selection of them in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select

from reconciler.inbox.replay import replay_event
from reconciler.storage.models import INBOX_EVENTS, EventStatus
from reconciler.storage.sql import pin_index
from reconciler.storage.types import as_utc


@dataclass(frozen=True)
class DeadGroup:
    source: str
    event_type: str | None
    last_error: str | None
    count: int
    newest: datetime | None


def dead_groups(conn: Connection, sources: Sequence[str] = (), limit: int = 200) -> list[DeadGroup]:
    """Dead events per source, type and last error, biggest group first."""
    n = func.count().label("n")
    stmt = (
        select(
            INBOX_EVENTS.c.source,
            INBOX_EVENTS.c.event_type,
            INBOX_EVENTS.c.last_error,
            n,
            func.max(INBOX_EVENTS.c.received_at),
        )
        .where(INBOX_EVENTS.c.status == EventStatus.DEAD)
        .group_by(INBOX_EVENTS.c.source, INBOX_EVENTS.c.event_type, INBOX_EVENTS.c.last_error)
        .order_by(n.desc(), INBOX_EVENTS.c.source, INBOX_EVENTS.c.event_type)
        .limit(limit)
    )
    if sources:
        stmt = stmt.where(INBOX_EVENTS.c.source.in_(sources))
    stmt = pin_index(stmt, INBOX_EVENTS, "ix_inbox_events_status_next_attempt_at", conn.dialect)
    return [
        DeadGroup(str(s), t, err, int(c), as_utc(newest))
        for s, t, err, c, newest in conn.execute(stmt)
    ]


def dead_events(
    conn: Connection,
    *,
    source: str,
    event_type: str | None,
    last_error: str | None,
    limit: int = 500,
) -> list[dict[str, Any]]:
    """The dead events of one group, newest first."""
    stmt = (
        select(
            INBOX_EVENTS.c.source,
            INBOX_EVENTS.c.event_id,
            INBOX_EVENTS.c.event_type,
            INBOX_EVENTS.c.object_id,
            INBOX_EVENTS.c.attempts,
            INBOX_EVENTS.c.received_at,
        )
        .where(
            INBOX_EVENTS.c.status == EventStatus.DEAD,
            INBOX_EVENTS.c.source == source,
            INBOX_EVENTS.c.event_type.is_(None)
            if event_type is None
            else INBOX_EVENTS.c.event_type == event_type,
            INBOX_EVENTS.c.last_error.is_(None)
            if last_error is None
            else INBOX_EVENTS.c.last_error == last_error,
        )
        .order_by(INBOX_EVENTS.c.received_at.desc())
        .limit(limit)
    )
    return [dict(r._mapping) for r in conn.execute(stmt)]


def replay_many(
    conn: Connection, keys: Sequence[tuple[str, str]], *, actor: str, reason: str
) -> int:
    """Replay each ``(source, event_id)`` in the caller's transaction: all of them or none."""
    for source, event_id in keys:
        replay_event(conn, source=source, event_id=event_id, actor=actor, reason=reason)
    return len(keys)
