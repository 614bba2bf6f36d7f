"""Durable intake: insert-if-new the event and append the delivery in ONE transaction.

The database decides "seen before?" (unique constraint on source + event_id, ``ON CONFLICT DO NOTHING``),
never a SELECT followed by an INSERT. Used by the receiver and by backfill alike.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert

from connectors.parsing import ParsedEvent
from reconciler.inbox.bounds import rejected_row_values
from reconciler.storage.dialect import insert_for
from reconciler.storage.models import (
    DELIVERIES,
    INBOX_EVENTS,
    DeliveryOutcome,
    EventOrigin,
    EventStatus,
)

EVENTS = INBOX_EVENTS


@dataclass(frozen=True)
class IncomingEvent:
    """A verified delivery to be stored."""

    source: str
    parsed: ParsedEvent
    body: bytes
    headers: dict[str, str]
    received_at: datetime
    content_type: str | None = None
    origin: EventOrigin = EventOrigin.WEBHOOK
    remote_addr: str | None = None
    correlation_id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True)
class RejectedRecord:
    """A delivery refused before it could become an event."""

    source: str
    status_code: int
    reason: str
    received_at: datetime
    remote_addr: str | None = None
    event_id: str | None = None
    delivery_id: str | None = None


Item = IncomingEvent | RejectedRecord


def _event_row(item: IncomingEvent) -> dict[str, Any]:
    p = item.parsed
    return {
        "source": item.source,
        "event_id": p.event_id,
        "event_type": p.event_type,
        "object_type": p.object_type,
        "object_id": p.object_id,
        "occurred_at": p.occurred_at,
        "api_version": p.api_version,
        "account": p.account,
        "body": item.body,
        "content_type": item.content_type,
        "headers": item.headers,
        "received_at": item.received_at,
        "origin": item.origin,
        "status": EventStatus.PENDING,
        "attempts": 0,
        "next_attempt_at": item.received_at,
        "correlation_id": item.correlation_id,
    }


def store_items(conn: Connection, items: Sequence[Item]) -> list[DeliveryOutcome]:
    """Store a batch in the caller's transaction; return each item's outcome, in order.

    All events go in one executemany of ``INSERT ... ON CONFLICT DO NOTHING RETURNING source, event_id``
    (SQLAlchemy sends it as multi-row statements): the keys returned are the new events, every other
    item is a duplicate. Within a batch the first item of a key wins. Rows are sent in
    (source, event_id) order so that concurrent batches on PostgreSQL lock in one order and cannot
    deadlock. One statement per batch also means one compilation per batch: the dialects' INSERT
    constructs are not in SQLAlchemy's statement cache (sqlalchemy/sqlalchemy#10445), so compiling
    per row would cost more than storing the row.
    """
    outcomes: list[DeliveryOutcome] = []
    events = [it for it in items if isinstance(it, IncomingEvent)]
    inserted: set[tuple[str, str]] = set()
    if events:
        stmt = (
            insert_for(conn, EVENTS)
            .on_conflict_do_nothing(index_elements=["source", "event_id"])
            .returning(EVENTS.c.source, EVENTS.c.event_id)
        )
        rows = sorted((_event_row(e) for e in events), key=lambda r: (r["source"], r["event_id"]))
        inserted = {(r.source, r.event_id) for r in conn.execute(stmt, rows)}
    deliveries = []
    for item in items:
        if isinstance(item, IncomingEvent):
            key = (item.source, item.parsed.event_id)
            outcome = DeliveryOutcome.ACCEPTED if key in inserted else DeliveryOutcome.DUPLICATE
            inserted.discard(key)
            deliveries.append(
                {
                    "source": item.source,
                    "event_id": item.parsed.event_id,
                    "delivery_id": item.parsed.delivery_id,
                    "received_at": item.received_at,
                    "outcome": outcome,
                    "status_code": 200,
                    "reason": None,
                    "remote_addr": item.remote_addr,
                }
            )
        else:
            outcome = DeliveryOutcome.REJECTED
            deliveries.append(
                {
                    **rejected_row_values(
                        item.source, item.reason, item.event_id, item.delivery_id, item.remote_addr
                    ),
                    "received_at": item.received_at,
                    "outcome": outcome,
                    "status_code": item.status_code,
                }
            )
        outcomes.append(outcome)
    if deliveries:
        conn.execute(insert(DELIVERIES), deliveries)
    return outcomes
