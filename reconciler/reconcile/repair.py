"""Operator actions on discrepancies and events, shared by the CLI, the scheduler and the dashboard.
Every action is audited in the same transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, select, update

from connectors.base import Connector, Record
from reconciler.audit import record_audit
from reconciler.config import SourceSettings
from reconciler.correlation import mint, usable
from reconciler.errors import ActionRefusedError, NoSuchRecordError
from reconciler.inbox.store import IncomingEvent, store_items
from reconciler.reconcile.export import DiscrepancyFilter
from reconciler.sources import provider
from reconciler.storage.models import DISCREPANCIES, DiscrepancyKind, DiscrepancyStatus, EventOrigin
from reconciler.storage.types import utcnow


def set_status(
    conn: Connection, discrepancy_id: int, status: DiscrepancyStatus, *, actor: str, reason: str
) -> None:
    row = conn.execute(
        select(
            DISCREPANCIES.c.id,
            DISCREPANCIES.c.source,
            DISCREPANCIES.c.event_id,
            DISCREPANCIES.c.status,
        ).where(DISCREPANCIES.c.id == discrepancy_id)
    ).first()
    if row is None:
        raise NoSuchRecordError(f"no discrepancy {discrepancy_id}")
    if not reason or not reason.strip():
        raise ActionRefusedError("a reason is required")
    conn.execute(
        update(DISCREPANCIES)
        .where(DISCREPANCIES.c.id == discrepancy_id)
        .values(status=status, resolution=reason, resolved_at=utcnow())
    )
    record_audit(
        conn,
        actor=actor,
        action=f"discrepancy.{status.value}",
        source=row.source,
        event_id=row.event_id,
        target=f"discrepancy:{discrepancy_id}",
        reason=reason,
        detail={"previous_status": str(row.status)},
    )


def set_status_bulk(
    conn: Connection, flt: DiscrepancyFilter, status: DiscrepancyStatus, *, actor: str, reason: str
) -> int:
    if not reason or not reason.strip():
        raise ActionRefusedError("a reason is required")
    ids = [r[0] for r in conn.execute(select(DISCREPANCIES.c.id).where(*flt.where()))]
    if ids:
        conn.execute(
            update(DISCREPANCIES)
            .where(DISCREPANCIES.c.id.in_(ids))
            .values(status=status, resolution=reason, resolved_at=utcnow())
        )
    record_audit(
        conn,
        actor=actor,
        action=f"discrepancy.{status.value}.bulk",
        target=f"{len(ids)} discrepancies",
        reason=reason,
        detail={"ids": ids[:1000], "count": len(ids)},
    )
    return len(ids)


@dataclass(frozen=True)
class BackfillResult:
    source: str
    event_id: str
    # accepted (new event) | duplicate (already in the inbox) | conflict (in the inbox with other
    # content: flagged, not applied) | redelivery_requested
    outcome: str
    missing_resolved: int = 0  # the open "missing" discrepancies of the event it answered


def _incoming(source: SourceSettings, record: Record) -> IncomingEvent:
    """The fetched record as the receiver would have stored it."""
    parsed, body = provider(source.kind).as_delivery(record)
    return IncomingEvent(
        source=source.name,
        parsed=parsed,
        body=body,
        headers={},
        received_at=utcnow(),
        content_type="application/json",
        origin=EventOrigin.BACKFILL,
        fingerprint_ignore=source.fingerprint_paths(),
        correlation_id=usable(parsed.request_id) or mint(),
    )


def backfill(
    engine: Engine,
    source: SourceSettings,
    connector: Connector,
    event_id: str,
    *,
    actor: str,
    reason: str | None = None,
    redeliver: bool = False,
) -> BackfillResult:
    """Fetch the event from the source and store it through the receiver's insert-if-new path; if the
    real webhook arrives later it is a duplicate delivery, not a second event. ``redeliver`` asks the
    provider (GitHub) to send it again instead."""
    if redeliver:
        connector.redeliver(event_id)
        with engine.begin() as conn:
            record_audit(
                conn,
                actor=actor,
                action="redeliver",
                source=source.name,
                event_id=event_id,
                reason=reason,
            )
        return BackfillResult(source.name, event_id, "redelivery_requested")
    record = connector.fetch_event(event_id)
    item = _incoming(source, record)
    with engine.begin() as conn:
        [stored] = store_items(conn, [item])
        outcome = stored.outcome
        # the event is in the inbox now: "not received" is answered, whatever the next run says
        closed = conn.execute(
            update(DISCREPANCIES)
            .where(
                DISCREPANCIES.c.source == source.name,
                DISCREPANCIES.c.event_id == item.parsed.event_id,
                DISCREPANCIES.c.kind == DiscrepancyKind.MISSING,
                DISCREPANCIES.c.status == DiscrepancyStatus.OPEN,
            )
            .values(
                status=DiscrepancyStatus.RESOLVED,
                resolution=f"backfilled by {actor}",
                resolved_at=utcnow(),
            )
        ).rowcount
        detail: dict[str, Any] = {"outcome": outcome.value, "missing_resolved": closed}
        record_audit(
            conn,
            actor=actor,
            action="backfill",
            source=source.name,
            event_id=item.parsed.event_id,
            reason=reason,
            detail=detail,
        )
    return BackfillResult(source.name, item.parsed.event_id, outcome.value, closed)
