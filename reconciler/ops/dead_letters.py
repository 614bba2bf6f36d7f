"""Dead-lettered events grouped for triage, and replaying a selection of them in one transaction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, and_, func, or_, select, update

from reconciler.audit import record_audit
from reconciler.errors import ActionRefusedError
from reconciler.inbox.replay import replay_event, requeued
from reconciler.storage.models import INBOX_EVENTS, EventStatus
from reconciler.storage.sql import LIKE_ESCAPE, like_literal, pin_index
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


@dataclass(frozen=True)
class DeadFilter:
    """A selection of dead events by what the Dead letters page filters on; empty parts match all.

    ``groups`` narrows to (source, event type, last error) triples, as the page's group table
    shows them; the other parts narrow further."""

    sources: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    error_contains: str = ""
    received_from: datetime | None = None
    received_to: datetime | None = None
    groups: tuple[tuple[str, str | None, str | None], ...] = ()

    def where(self) -> list[Any]:
        e = INBOX_EVENTS
        clauses: list[Any] = [e.c.status == EventStatus.DEAD]
        if self.sources:
            clauses.append(e.c.source.in_(self.sources))
        if self.types:
            clauses.append(e.c.event_type.in_(self.types))
        needle = self.error_contains.replace("\x00", "").strip().lower()
        if needle:
            pattern = f"%{like_literal(needle)}%"
            clauses.append(func.lower(e.c.last_error).like(pattern, escape=LIKE_ESCAPE))
        if self.received_from is not None:
            clauses.append(e.c.received_at >= self.received_from)
        if self.received_to is not None:
            clauses.append(e.c.received_at < self.received_to)
        if self.groups:
            clauses.append(
                or_(
                    *(
                        and_(
                            e.c.source == source,
                            e.c.event_type.is_(None)
                            if event_type is None
                            else e.c.event_type == event_type,
                            e.c.last_error.is_(None)
                            if last_error is None
                            else e.c.last_error == last_error,
                        )
                        for source, event_type, last_error in self.groups
                    )
                )
            )
        return clauses

    def describe(self) -> str:
        """The selection in words, for the confirmation and the audit entry."""
        parts = []
        if self.groups:
            parts.append(f"{len(self.groups)} group(s)")
        if self.sources:
            parts.append("source " + ", ".join(self.sources))
        if self.types:
            parts.append("type " + ", ".join(self.types))
        if self.error_contains.strip():
            parts.append(f"error containing '{self.error_contains.strip()}'")
        if self.received_from is not None:
            parts.append(f"received from {self.received_from.isoformat(timespec='seconds')}")
        if self.received_to is not None:
            parts.append(f"received before {self.received_to.isoformat(timespec='seconds')}")
        return "dead events" + (" with " + "; ".join(parts) if parts else " (all)")


def count_dead(conn: Connection, flt: DeadFilter) -> int:
    """How many dead events the selection holds now: the dry run of a bulk replay."""
    stmt = select(func.count()).select_from(INBOX_EVENTS).where(*flt.where())
    return int(conn.execute(stmt).scalar_one())


def list_dead(
    conn: Connection, flt: DeadFilter, *, before_id: int | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """A page of the selection, newest first (keyset on the row id)."""
    e = INBOX_EVENTS
    stmt = select(
        e.c.id,
        e.c.source,
        e.c.event_id,
        e.c.event_type,
        e.c.object_id,
        e.c.attempts,
        e.c.error_class,
        e.c.received_at,
        e.c.last_error,
    ).where(*flt.where())
    if before_id is not None:
        stmt = stmt.where(e.c.id < before_id)
    return [dict(r._mapping) for r in conn.execute(stmt.order_by(e.c.id.desc()).limit(limit))]


def replay_matching(
    engine: Engine,
    flt: DeadFilter,
    *,
    actor: str,
    reason: str,
    expected: int | None = None,
    batch_size: int = 500,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Put every dead event the selection holds back to pending, same event ids, in batches of
    ``batch_size`` within ONE transaction (all or none) and with ONE audit entry that records the
    selection, the count and the event ids.

    ``expected`` is the count the operator confirmed: if the selection grew or shrank since, the
    replay is refused rather than acting on events nobody counted. ``progress(done, total)`` is
    called after each batch."""
    if not reason or not reason.strip():
        raise ActionRefusedError("a reason is required")
    e = INBOX_EVENTS
    with engine.begin() as conn:
        total = count_dead(conn, flt)
        if total == 0:
            raise ActionRefusedError(f"no {flt.describe()}: nothing to replay")
        if expected is not None and total != expected:
            raise ActionRefusedError(
                f"the selection now holds {total:,} events, not the {expected:,} confirmed: "
                "count again and confirm"
            )
        replayed: list[tuple[str, str]] = []
        last_id = 0
        while True:
            batch = conn.execute(
                select(e.c.id, e.c.source, e.c.event_id)
                .where(*flt.where(), e.c.id > last_id)
                .order_by(e.c.id)
                .limit(batch_size)
            ).all()
            if not batch:
                break
            last_id = batch[-1].id
            conn.execute(
                update(e)
                .where(e.c.id.in_([r.id for r in batch]), e.c.status == EventStatus.DEAD)
                .values(**requeued())
            )
            replayed.extend((r.source, r.event_id) for r in batch)
            if progress is not None:
                progress(len(replayed), total)
        selection = {
            k: v.isoformat() if isinstance(v, datetime) else v
            for k, v in asdict(flt).items()
            if v not in ((), "", None)
        }
        record_audit(
            conn,
            actor=actor,
            action="replay.bulk",
            target=f"{len(replayed)} events",
            reason=reason.strip(),
            detail={
                "selection": selection,
                "described": flt.describe(),
                "count": len(replayed),
                "events": [list(k) for k in replayed],
            },
        )
    return len(replayed)
