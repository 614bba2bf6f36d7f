"""Conflicting redeliveries: a stored event id delivered again with other content.

The receiver keeps the first copy, logs the later one (``deliveries`` outcome ``conflict``, its raw
body kept) and opens a ``conflict`` discrepancy per differing field in the same transaction
(``field`` = JSON path, ``local_value`` = stored, ``source_value`` = the later delivery). An operator
then keeps the stored version (resolves the discrepancy) or applies the later one
(:func:`apply_later`: the event is replayed with the later body, same event id, audited with both
fingerprints).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from sqlalchemy import Connection, select, update

from connectors.fingerprint import Segment, differences
from reconciler.audit import record_audit
from reconciler.errors import ActionRefusedError, NoSuchRecordError
from reconciler.inbox.replay import requeued
from reconciler.storage.dialect import insert_for
from reconciler.storage.models import (
    DELIVERIES,
    DISCREPANCIES,
    INBOX_EVENTS,
    DeliveryOutcome,
    DiscrepancyKind,
    DiscrepancyStatus,
    EventStatus,
)
from reconciler.storage.types import utcnow
from reconciler.storage.upserts import on_natural_key

# Fields recorded per conflict; a body that differs in more is summed up in the last row's detail.
MAX_FIELDS = 50
RECEIVER_RUN = "receiver"  # first/last_run_id of discrepancies the receiver opened
FIELD_LENGTH = 128


@dataclass(frozen=True)
class Conflict:
    source: str
    event_id: str
    event_type: str | None
    object_type: str | None
    object_id: str | None
    occurred_at: datetime | None
    stored_body: bytes
    stored_fingerprint: str
    later_body: bytes
    later_fingerprint: str
    delivery_row: int  # the later delivery's row in ``deliveries``
    received_at: datetime
    ignore: tuple[tuple[Segment, ...], ...] = ()
    content_type: str | None = None  # (a form body's fields are compared, not its bytes)

    @cached_property
    def diffs(self) -> list[tuple[str, Any, Any]]:
        """(path, stored value, later value) where the two bodies differ: computed once, for the
        discrepancy rows and for the answer to the delivery."""
        return differences(self.stored_body, self.later_body, self.ignore, self.content_type)

    @property
    def fields(self) -> tuple[str, ...]:
        """The paths that differ (at most ``MAX_FIELDS``), for the answer to the later delivery;
        empty where the diff cannot say (e.g. number formatting)."""
        return tuple(path for path, _, _ in self.diffs[:MAX_FIELDS] if path)


def _storable(text: str) -> str:
    """PostgreSQL text holds neither NUL nor a lone surrogate (JSON may escape one, UTF-8 cannot
    encode it): each is kept as its JSON escape, so the conflict is still logged."""
    if text.isascii() and "\x00" not in text:
        return text
    return "".join(
        f"\\u{ord(c):04x}" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in text
    )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return _storable(value)
    return _storable(json.dumps(value, sort_keys=True, ensure_ascii=False))


def discrepancy_rows(conflict: Conflict) -> list[dict[str, Any]]:
    """One discrepancy row per differing path (at most ``MAX_FIELDS``)."""
    diffs = conflict.diffs
    if not diffs:  # the fingerprints differ where the diff cannot say (e.g. number formatting)
        diffs = [("", None, None)]
    detail = {
        "stored_fingerprint": conflict.stored_fingerprint,
        "later_fingerprint": conflict.later_fingerprint,
        "delivery_row": conflict.delivery_row,
        "fields": len(diffs),
    }
    rows = []
    for path, stored, later in diffs[:MAX_FIELDS]:
        rows.append(
            {
                "source": conflict.source,
                "kind": DiscrepancyKind.CONFLICT,
                "record_key": conflict.event_id[:400],
                "field": _storable(path)[:FIELD_LENGTH],
                "event_id": conflict.event_id,
                "event_type": conflict.event_type,
                "object_type": conflict.object_type,
                "object_id": conflict.object_id,
                "source_value": _text(later),
                "local_value": _text(stored),
                "amount": None,
                "currency": None,
                "cause": "redelivery",
                "recover_by": None,
                "occurred_at": conflict.occurred_at,
                "detection_delay_seconds": (
                    (conflict.received_at - conflict.occurred_at).total_seconds()
                    if conflict.occurred_at
                    else None
                ),
                "first_seen_at": conflict.received_at,
                "last_seen_at": conflict.received_at,
                "first_run_id": RECEIVER_RUN,
                "last_run_id": RECEIVER_RUN,
                "status": DiscrepancyStatus.OPEN,
                "detail": detail,
            }
        )
    return rows


def open_conflicts(conn: Connection, conflicts: Sequence[Conflict]) -> None:
    """Upsert the conflicts' discrepancies in the caller's transaction (a resolved one reopens)."""
    rows = [row for c in conflicts for row in discrepancy_rows(c)]
    # one natural key once per statement: the later of two conflicts in a batch wins
    unique = {(r["source"], r["record_key"], r["field"]): r for r in rows}
    if unique:
        conn.execute(on_natural_key(insert_for(conn, DISCREPANCIES)), list(unique.values()))


@dataclass(frozen=True)
class ConflictBodies:
    """The two versions of one conflicting event, for a side-by-side view."""

    source: str
    event_id: str
    stored: bytes
    later: bytes
    stored_fingerprint: str | None
    later_fingerprint: str | None
    delivery_row: int
    received_at: datetime
    status: str  # the discrepancy's
    content_type: str | None = None  # the stored event's


def conflict_bodies(conn: Connection, discrepancy_id: int) -> ConflictBodies:
    """The stored body and the later delivery's body of a ``conflict`` discrepancy."""
    d = DISCREPANCIES
    row = conn.execute(
        select(d.c.source, d.c.event_id, d.c.kind, d.c.detail, d.c.status).where(
            d.c.id == discrepancy_id
        )
    ).first()
    if row is None:
        raise NoSuchRecordError(f"no discrepancy with id {discrepancy_id}")
    if row.kind != DiscrepancyKind.CONFLICT or not row.event_id:
        raise ActionRefusedError(f"discrepancy {discrepancy_id} is {row.kind}, not a conflict")
    delivery_row = int((row.detail or {}).get("delivery_row") or 0)
    later = conn.execute(
        select(DELIVERIES.c.body, DELIVERIES.c.fingerprint, DELIVERIES.c.received_at).where(
            DELIVERIES.c.id == delivery_row, DELIVERIES.c.outcome == DeliveryOutcome.CONFLICT
        )
    ).first()
    stored = conn.execute(
        select(INBOX_EVENTS.c.body, INBOX_EVENTS.c.fingerprint, INBOX_EVENTS.c.content_type).where(
            INBOX_EVENTS.c.source == row.source, INBOX_EVENTS.c.event_id == row.event_id
        )
    ).first()
    if later is None or later.body is None or stored is None:
        raise NoSuchRecordError(
            f"discrepancy {discrepancy_id}: the stored event or the later delivery is gone (pruned)"
        )
    return ConflictBodies(
        row.source,
        row.event_id,
        stored.body,
        later.body,
        stored.fingerprint or (row.detail or {}).get("stored_fingerprint"),
        later.fingerprint,
        delivery_row,
        later.received_at,
        str(row.status),
        stored.content_type,
    )


def _resolve_event(conn: Connection, bodies: ConflictBodies, resolution: str) -> int:
    """Resolve every open conflict discrepancy (field) of the event."""
    d = DISCREPANCIES
    return int(
        conn.execute(
            update(d)
            .where(
                d.c.source == bodies.source,
                d.c.kind == DiscrepancyKind.CONFLICT,
                d.c.record_key == bodies.event_id[:400],
                d.c.status == DiscrepancyStatus.OPEN,
            )
            .values(status=DiscrepancyStatus.RESOLVED, resolution=resolution, resolved_at=utcnow())
        ).rowcount
    )


def _open_conflict(conn: Connection, discrepancy_id: int) -> ConflictBodies:
    bodies = conflict_bodies(conn, discrepancy_id)
    if bodies.status != DiscrepancyStatus.OPEN:
        raise ActionRefusedError(
            f"discrepancy {discrepancy_id} is {bodies.status}: only an open conflict can be "
            "kept or applied"
        )
    return bodies


def keep_stored(conn: Connection, discrepancy_id: int, *, actor: str, reason: str) -> int:
    """The stored version is right: resolve every open conflict field of the event (audited with
    both fingerprints); the later delivery stays in the log. Returns how many were resolved."""
    bodies = _open_conflict(conn, discrepancy_id)
    resolved = _resolve_event(conn, bodies, f"kept the stored version: {reason}")
    record_audit(
        conn,
        actor=actor,
        action="conflict.keep_stored",
        source=bodies.source,
        event_id=bodies.event_id,
        target=f"delivery:{bodies.delivery_row}",
        reason=reason,
        detail={
            "stored_fingerprint": bodies.stored_fingerprint,
            "later_fingerprint": bodies.later_fingerprint,
            "discrepancy": discrepancy_id,
            "resolved": resolved,
        },
    )
    return resolved


@dataclass(frozen=True)
class AppliedLater:
    source: str
    event_id: str
    previous_status: str
    resolved: int


def apply_later(
    conn: Connection,
    discrepancy_id: int,
    *,
    actor: str,
    reason: str,
) -> AppliedLater:
    """Replace the stored body with the later delivery's, put the event back to pending (same event
    id, attempts from zero) and resolve the event's open conflict discrepancies; audited with both
    fingerprints and the replaced body. The event's identity columns (type, object) stay: one event
    id is one event."""
    bodies = _open_conflict(conn, discrepancy_id)
    e = INBOX_EVENTS
    current = conn.execute(
        select(e.c.id, e.c.status, e.c.attempts).where(
            e.c.source == bodies.source, e.c.event_id == bodies.event_id
        )
    ).one()
    status = EventStatus(current.status)
    if status is EventStatus.PROCESSING:
        raise ActionRefusedError(
            f"event '{bodies.event_id}' is being processed now; apply the later version after it"
        )
    # both as the receiver computed them (with the source's ignored paths) when it saw the conflict
    later_fp, stored_fp = bodies.later_fingerprint, bodies.stored_fingerprint
    changed = conn.execute(
        update(e)
        .where(e.c.id == current.id, e.c.status == status)
        .values(body=bodies.later, fingerprint=later_fp, **requeued(new_round=True))
    )
    if changed.rowcount != 1:
        raise ActionRefusedError(f"event '{bodies.event_id}' changed meanwhile; try again")
    resolved = _resolve_event(
        conn, bodies, f"applied the later delivery (row {bodies.delivery_row}): {reason}"
    )
    record_audit(
        conn,
        actor=actor,
        action="conflict.apply_later",
        source=bodies.source,
        event_id=bodies.event_id,
        target=f"delivery:{bodies.delivery_row}",
        reason=reason,
        detail={
            "stored_fingerprint": stored_fp,
            "applied_fingerprint": later_fp,
            "previous_status": status.value,
            "previous_attempts": current.attempts,
            "discrepancy": discrepancy_id,
            "replaced_body": bodies.stored.decode("utf-8", "replace"),
        },
    )
    return AppliedLater(bodies.source, bodies.event_id, status.value, int(resolved))
