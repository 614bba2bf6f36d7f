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

from sqlalchemy import Connection, insert, select, tuple_

from connectors.fingerprint import Segment, fingerprint
from connectors.parsing import ParsedEvent
from reconciler.inbox.bounds import rejected_row_values
from reconciler.inbox.conflicts import Conflict, open_conflicts
from reconciler.storage.dialect import CompiledOnce, insert_for
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
    # the source's fingerprint_ignore paths, parsed
    fingerprint_ignore: tuple[tuple[Segment, ...], ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.source, self.parsed.event_id)


@dataclass(frozen=True)
class RejectedRecord:
    """A delivery refused before it could become an event (or, with ``outcome`` handshake, a
    verified request that is no event: logged, answered, not stored as an event)."""

    source: str
    status_code: int
    reason: str
    received_at: datetime
    remote_addr: str | None = None
    event_id: str | None = None
    delivery_id: str | None = None
    outcome: DeliveryOutcome = DeliveryOutcome.REJECTED


Item = IncomingEvent | RejectedRecord


@dataclass(frozen=True)
class Stored:
    """What became of one item: its outcome, and for a conflict the paths where it differs from
    the stored copy (computed in the storing transaction, for the answer to its sender)."""

    outcome: DeliveryOutcome
    fields: tuple[str, ...] = ()


EVENT_COLUMNS = (
    "source",
    "event_id",
    "event_type",
    "object_type",
    "object_id",
    "occurred_at",
    "api_version",
    "account",
    "body",
    "content_type",
    "headers",
    "received_at",
    "queued_at",
    "origin",
    "status",
    "attempts",
    "next_attempt_at",
    "correlation_id",
    "fingerprint",
)


def _event_row(item: IncomingEvent, content: str) -> dict[str, Any]:
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
        "queued_at": item.received_at,
        "origin": item.origin,
        "status": EventStatus.PENDING,
        "attempts": 0,
        "next_attempt_at": item.received_at,
        "correlation_id": item.correlation_id,
        "fingerprint": content,
    }


STORE_ONE_EVENT = CompiledOnce(
    EVENTS,
    EVENT_COLUMNS,
    lambda insert: insert.on_conflict_do_nothing(index_elements=["source", "event_id"]).returning(
        EVENTS.c.source, EVENTS.c.event_id
    ),
)


def store_items(conn: Connection, items: Sequence[Item]) -> list[Stored]:
    """Store a batch in the caller's transaction; return what became of each item, in order.

    All events go in one executemany of ``INSERT ... ON CONFLICT DO NOTHING RETURNING source, event_id``
    (SQLAlchemy sends it as multi-row statements): the keys returned are the new events. Every other
    item is a redelivery: a ``duplicate`` when its content fingerprint is the stored one's, else a
    ``conflict`` (kept in its delivery row, flagged as a discrepancy, not applied). Within a batch the
    first item of a key wins. Rows are sent in (source, event_id) order so that concurrent batches on
    PostgreSQL lock in one order and cannot deadlock. One statement per batch also means one
    compilation per batch: the dialects' INSERT constructs are not in SQLAlchemy's statement cache
    (sqlalchemy/sqlalchemy#10445), so compiling per row would cost more than storing the row.
    """
    events = [it for it in items if isinstance(it, IncomingEvent)]
    contents = {id(e): fingerprint(e.body, e.fingerprint_ignore, e.content_type) for e in events}
    inserted: set[tuple[str, str]] = set()
    if events:
        stmt = (
            insert_for(conn, EVENTS)
            .on_conflict_do_nothing(index_elements=["source", "event_id"])
            .returning(EVENTS.c.source, EVENTS.c.event_id)
        )
        rows = sorted(
            (_event_row(e, contents[id(e)]) for e in events),
            key=lambda r: (r["source"], r["event_id"]),
        )
        if len(rows) == 1:  # (few connections: most batches hold one event)
            found = STORE_ONE_EVENT.execute(conn, rows[0])
        else:
            found = list(conn.execute(stmt, rows))
        inserted = {(source, event_id) for source, event_id in found}
    # What each key's redeliveries are compared with: the copy this batch stored, or the inbox's.
    first: dict[tuple[str, str], IncomingEvent] = {}
    for e in events:
        if e.key in inserted:
            first.setdefault(e.key, e)
    stored = _stored_contents(conn, [e for e in events if e.key not in first], contents)

    outcomes: list[Stored] = []
    deliveries: list[dict[str, Any]] = []
    conflicts: list[Conflict] = []
    for item in items:
        if isinstance(item, RejectedRecord):
            outcomes.append(Stored(item.outcome))
            deliveries.append(
                {
                    **rejected_row_values(
                        item.source, item.reason, item.event_id, item.delivery_id, item.remote_addr
                    ),
                    "received_at": item.received_at,
                    "outcome": item.outcome,
                    "status_code": item.status_code,
                }
            )
            continue
        row = _delivery_row(item)
        if first.get(item.key) is item:
            outcomes.append(Stored(DeliveryOutcome.ACCEPTED))
            deliveries.append({**row, "outcome": DeliveryOutcome.ACCEPTED})
            continue
        mine = contents[id(item)]
        theirs = _compared_with(item, first, stored, contents)
        if theirs is None or theirs[0] == mine:  # (None: the stored copy is gone: pruned meanwhile)
            outcomes.append(Stored(DeliveryOutcome.DUPLICATE))
            deliveries.append(row)
            continue
        # (a row of its own, with the columns no other delivery row has: the batch's executemany
        # needs one set of columns)
        row.update(outcome=DeliveryOutcome.CONFLICT, fingerprint=mine, body=item.body)
        delivery_row = conn.execute(insert(DELIVERIES).returning(DELIVERIES.c.id), row).scalar_one()
        p = item.parsed
        conflict = Conflict(
            source=item.source,
            event_id=p.event_id,
            event_type=p.event_type,
            object_type=p.object_type,
            object_id=p.object_id,
            occurred_at=p.occurred_at,
            stored_body=theirs[1],
            stored_fingerprint=theirs[0],
            later_body=item.body,
            later_fingerprint=mine,
            delivery_row=int(delivery_row),
            received_at=item.received_at,
            ignore=item.fingerprint_ignore,
            content_type=item.content_type,
        )
        conflicts.append(conflict)
        outcomes.append(Stored(DeliveryOutcome.CONFLICT, conflict.fields))
    if deliveries:
        conn.execute(insert(DELIVERIES), deliveries)
    open_conflicts(conn, conflicts)
    return outcomes


def _delivery_row(item: IncomingEvent) -> dict[str, Any]:
    return {
        "source": item.source,
        "event_id": item.parsed.event_id,
        "delivery_id": item.parsed.delivery_id,
        "received_at": item.received_at,
        "outcome": DeliveryOutcome.DUPLICATE,
        "status_code": 200,
        "reason": None,
        "remote_addr": item.remote_addr,
    }


_Copies = dict[tuple[str, str], tuple[str | None, bytes | None]]


def _stored_contents(
    conn: Connection, redelivered: Sequence[IncomingEvent], contents: dict[int, str]
) -> _Copies:
    """The inbox's fingerprint of each redelivered key; its body too where the redelivery's
    fingerprint differs or the row has none (stored before fingerprints): a duplicate costs one
    narrow read, a conflict one more."""
    keys = sorted({e.key for e in redelivered})
    if not keys:
        return {}
    found: _Copies = {}
    for source, event_id, content in conn.execute(
        select(EVENTS.c.source, EVENTS.c.event_id, EVENTS.c.fingerprint).where(
            tuple_(EVENTS.c.source, EVENTS.c.event_id).in_(keys)
        )
    ):
        found[(source, event_id)] = (content, None)
    wanted = sorted(
        {e.key for e in redelivered if e.key in found and found[e.key][0] != contents[id(e)]}
    )
    if wanted:
        for source, event_id, body in conn.execute(
            select(EVENTS.c.source, EVENTS.c.event_id, EVENTS.c.body).where(
                tuple_(EVENTS.c.source, EVENTS.c.event_id).in_(wanted)
            )
        ):
            found[(source, event_id)] = (found[(source, event_id)][0], body)
    return found


def _compared_with(
    item: IncomingEvent,
    first: dict[tuple[str, str], IncomingEvent],
    stored: _Copies,
    contents: dict[int, str],
) -> tuple[str, bytes] | None:
    """(fingerprint, body) of the copy ``item`` is a redelivery of (body: only when needed)."""
    winner = first.get(item.key)
    if winner is not None:
        return contents[id(winner)], winner.body
    if item.key not in stored:
        return None
    content, body = stored[item.key]
    if content is None:
        if body is None:
            return None
        content = fingerprint(body, item.fingerprint_ignore, item.content_type)
    return content, body or b""
