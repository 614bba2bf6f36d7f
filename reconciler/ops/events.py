"""Event search and the timeline of one event (deliveries, attempts, audit entries), for the dashboard."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, or_, select

from reconciler.inbox.replay import EventDetail
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS

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
