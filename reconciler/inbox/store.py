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

from reconciler.inbox.parsing import ParsedEvent
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

    Events are inserted in (source, event_id) order so that concurrent batches on PostgreSQL take row
    locks in one order and cannot deadlock. Duplicates inside one batch resolve like any other.
    """
    outcomes: list[DeliveryOutcome | None] = [None] * len(items)
    stmt = (
        insert_for(conn, EVENTS)
        .on_conflict_do_nothing(index_elements=["source", "event_id"])
        .returning(EVENTS.c.id)
    )
    order = sorted(
        (i for i, it in enumerate(items) if isinstance(it, IncomingEvent)),
        key=lambda i: (items[i].source, items[i].parsed.event_id),  # type: ignore[union-attr]
    )
    for i in order:
        item = items[i]
        assert isinstance(item, IncomingEvent)
        inserted = conn.execute(stmt, _event_row(item)).first()
        outcomes[i] = DeliveryOutcome.ACCEPTED if inserted else DeliveryOutcome.DUPLICATE
    rows = []
    for i, item in enumerate(items):
        if isinstance(item, IncomingEvent):
            outcome = outcomes[i]
            assert outcome is not None
            rows.append(
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
            outcomes[i] = DeliveryOutcome.REJECTED
            rows.append(
                {
                    "source": item.source[:64],
                    "event_id": item.event_id,
                    "delivery_id": item.delivery_id,
                    "received_at": item.received_at,
                    "outcome": DeliveryOutcome.REJECTED,
                    "status_code": item.status_code,
                    "reason": item.reason[:512],
                    "remote_addr": item.remote_addr,
                }
            )
    if rows:
        conn.execute(insert(DELIVERIES), rows)
    return [o for o in outcomes if o is not None]
