"""Event search and the timeline of one event (deliveries, attempts, audit entries), for the dashboard."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select

from reconciler.inbox.replay import EventDetail
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS
from reconciler.storage.sql import LIKE_ESCAPE, like_literal

SUMMARY_COLUMNS = (
    INBOX_EVENTS.c.source,
    INBOX_EVENTS.c.event_id,
    INBOX_EVENTS.c.event_type,
    INBOX_EVENTS.c.object_type,
    INBOX_EVENTS.c.object_id,
    INBOX_EVENTS.c.status,
    INBOX_EVENTS.c.origin,
    INBOX_EVENTS.c.attempts,
    INBOX_EVENTS.c.received_at,
    INBOX_EVENTS.c.processed_at,
    INBOX_EVENTS.c.correlation_id,
    INBOX_EVENTS.c.last_error,
)


def search_events(
    conn: Connection, query: str, sources: Sequence[str], limit: int = 50
) -> list[dict[str, Any]]:
    """Events whose event id, object id, correlation id or provider delivery id is ``query``.

    Exact matches only, each through an index: ``(source, event_id)`` and ``(source, object_type,
    object_id)`` with the configured sources, ``correlation_id``, and deliveries' ``(source,
    event_id)`` for a delivery id. A delivery id is looked up without an index of its own; the
    providers that have one (GitHub) use it as the event id too.
    """
    q = query.strip()
    if not q:
        return []
    by_delivery = (
        select(DELIVERIES.c.event_id)
        .where(DELIVERIES.c.delivery_id == q, DELIVERIES.c.event_id.is_not(None))
        .limit(limit)
    )
    conds = [
        INBOX_EVENTS.c.correlation_id == q,
        INBOX_EVENTS.c.event_id.in_(by_delivery.scalar_subquery()),
    ]
    if sources:
        conds.append(INBOX_EVENTS.c.source.in_(sources) & (INBOX_EVENTS.c.event_id == q))
        conds.append(INBOX_EVENTS.c.source.in_(sources) & (INBOX_EVENTS.c.object_id == q))
    else:
        conds.extend([INBOX_EVENTS.c.event_id == q, INBOX_EVENTS.c.object_id == q])
    stmt = (
        select(*SUMMARY_COLUMNS)
        .where(or_(*conds))
        .order_by(INBOX_EVENTS.c.received_at.desc(), INBOX_EVENTS.c.id.desc())
        .limit(limit)
    )
    return [dict(r._mapping) for r in conn.execute(stmt)]


@dataclass(frozen=True)
class EventFilter:
    """What the Events page's list shows; every part optional."""

    sources: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()
    received_from: datetime | None = None  # inclusive
    received_to: datetime | None = None  # exclusive
    id_prefix: str = ""  # the event id's start, any case
    error_contains: str = ""  # within the last error, any case

    def where(self) -> list[Any]:
        e = INBOX_EVENTS
        clauses: list[Any] = []
        if self.sources:
            clauses.append(e.c.source.in_(self.sources))
        if self.types:
            clauses.append(e.c.event_type.in_(self.types))
        if self.statuses:
            clauses.append(e.c.status.in_(self.statuses))
        if self.origins:
            clauses.append(e.c.origin.in_(self.origins))
        if self.received_from is not None:
            clauses.append(e.c.received_at >= self.received_from)
        if self.received_to is not None:
            clauses.append(e.c.received_at < self.received_to)
        prefix = self.id_prefix.replace("\x00", "").strip()
        if prefix:
            pattern = like_literal(prefix.lower()) + "%"
            clauses.append(func.lower(e.c.event_id).like(pattern, escape=LIKE_ESCAPE))
        needle = self.error_contains.replace("\x00", "").strip().lower()
        if needle:
            pattern = f"%{like_literal(needle)}%"
            clauses.append(func.lower(e.c.last_error).like(pattern, escape=LIKE_ESCAPE))
        return clauses


@dataclass(frozen=True)
class EventPage:
    rows: list[dict[str, Any]]
    total: int
    next_after: tuple[datetime, int] | None  # pass back as ``after`` for the next page


def list_events(
    conn: Connection,
    flt: EventFilter,
    *,
    after: tuple[datetime, int] | None = None,
    limit: int = 50,
) -> EventPage:
    """A page of events, newest first, keyset-paged on ``(received_at, id)``, with the total that
    matches (no silent cap: the page says "50 of 3,211")."""
    e = INBOX_EVENTS
    where = flt.where()
    stmt = select(e.c.id, *SUMMARY_COLUMNS).where(*where)
    if after is not None:
        at, last_id = after
        stmt = stmt.where(or_(e.c.received_at < at, and_(e.c.received_at == at, e.c.id < last_id)))
    stmt = stmt.order_by(e.c.received_at.desc(), e.c.id.desc()).limit(limit + 1)
    rows = [dict(r._mapping) for r in conn.execute(stmt)]
    more = len(rows) > limit
    rows = rows[:limit]
    total = int(conn.execute(select(func.count()).select_from(e).where(*where)).scalar_one())
    last = rows[-1] if rows else None
    return EventPage(rows, total, (last["received_at"], last["id"]) if more and last else None)


def in_inbox(conn: Connection, source: str, event_id: str) -> bool:
    e = INBOX_EVENTS
    stmt = select(e.c.id).where(e.c.source == source, e.c.event_id == event_id)
    return conn.execute(stmt).first() is not None


def event_types(conn: Connection, sources: Sequence[str] = (), limit: int = 500) -> list[str]:
    """The event types seen (for the filter's choices)."""
    e = INBOX_EVENTS
    stmt = select(e.c.event_type).where(e.c.event_type.is_not(None)).distinct()
    if sources:
        stmt = stmt.where(e.c.source.in_(sources))
    return sorted(str(t) for (t,) in conn.execute(stmt.limit(limit)))


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime | None
    kind: str  # delivery | attempt | audit | received | processed
    summary: str
    detail: str = ""


def timeline(detail: EventDetail) -> list[TimelineEntry]:
    """Every thing that happened to one event, oldest first (pure)."""
    ev = detail.event
    out = [
        TimelineEntry(
            ev.get("received_at"), "stored", f"stored from {ev.get('origin')} ({ev.get('status')})"
        )
    ]
    for d in detail.deliveries:
        out.append(
            TimelineEntry(
                d["received_at"],
                "delivery",
                f"delivery {d['outcome']} (HTTP {d['status_code']})",
                d.get("reason") or "",
            )
        )
    for a in detail.attempts:
        cls = f" [{a['error_class']}]" if a.get("error_class") else ""
        out.append(
            TimelineEntry(
                a["finished_at"],
                "attempt",
                f"attempt #{a['attempt']}: {a['outcome']}{cls} by {a['worker']}",
                a.get("error") or "",
            )
        )
    for m in detail.messages:
        out.append(
            TimelineEntry(
                m["created_at"],
                "outgoing",
                f"outbox message #{m['id']} to {m['target']} written",
                f"key {m['key']}",
            )
        )
        code = f" HTTP {m['last_status_code']}" if m.get("last_status_code") else ""
        if m.get("sent_at"):
            out.append(
                TimelineEntry(
                    m["sent_at"],
                    "outgoing",
                    f"outbox message #{m['id']} sent to {m['target']}{code} "
                    f"(attempt {m['attempts']})",
                    f"key {m['key']}",
                )
            )
        elif str(m["status"]) != "pending":
            out.append(
                TimelineEntry(
                    None,
                    "outgoing",
                    f"outbox message #{m['id']} to {m['target']}: {m['status']}{code} after "
                    f"{m['attempts']} attempts",
                    m.get("last_error") or "",
                )
            )
    for entry in detail.audit:
        reason = f": {entry['reason']}" if entry.get("reason") else ""
        out.append(
            TimelineEntry(entry["at"], "audit", f"{entry['action']} by {entry['actor']}{reason}")
        )
    return sorted(out, key=lambda t: (t.at is None, t.at or datetime.min))
