"""Retention: delete processed inbox rows once no provider can deliver them again.

The inbox's unique (source, event id) row is what makes a late retry a duplicate instead of a second
event, so a processed event may only go once every provider has stopped retrying it: Stripe retries
for up to 3 days, Standard Webhooks' spec example spans about 3 days (Svix about 27 h), Shopify 4 h
since 2024-09, GitHub never (manual redelivery of the last 3 days, 7 on Enterprise Server); see
``docs/providers.md``. Hence a floor of 7 days, and never less than the longest reconciliation
lookback (an event pruned inside the window would be reported missing).

Only events that ended (``processed`` or ``ignored``) are deleted, with their processing attempts
and their deliveries; pending, failed and dead events and everything about them stay. Rejected
deliveries (no event) and queue snapshots older than the cutoff go too. The hourly rollups are
brought up to date first, so the dashboard's history keeps the counts. Each batch is one transaction.

The outgoing side likewise: outbox messages sent before the cutoff, with their attempts (unsent and
dead ones stay), outbox snapshots, idempotency keys past their own retention (``expires_at``), and
notifications made before the cutoff that are no longer pending.
A message's row is what makes a replayed event's message the same message: an event replayed after
its message was pruned sends it again, with the same key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Select,
    delete,
    exists,
    func,
    select,
    tuple_,
)

from reconciler.audit import record_audit
from reconciler.config import Settings
from reconciler.errors import ActionRefusedError
from reconciler.idempotency.store import prune_expired
from reconciler.ops.rollup import roll_up
from reconciler.storage.models import (
    DELIVERIES,
    DISCREPANCIES,
    INBOX_EVENTS,
    NOTIFICATIONS,
    OUTBOX,
    OUTBOX_ATTEMPTS,
    OUTBOX_SNAPSHOTS,
    PROCESSING_ATTEMPTS,
    QUEUE_SNAPSHOTS,
    SCHEDULER_HEARTBEATS,
    DeliveryOutcome,
    DiscrepancyKind,
    DiscrepancyStatus,
    EventStatus,
    NotificationStatus,
    OutboxStatus,
)

LONGEST_PROVIDER_RETRY = timedelta(days=3)
MARGIN = timedelta(days=4)
FLOOR = LONGEST_PROVIDER_RETRY + MARGIN  # 7 days
ENDED = (EventStatus.PROCESSED, EventStatus.IGNORED)
# deliveries that never became an event: refused ones, and handshakes (Slack's url_verification)
NO_EVENT = (DeliveryOutcome.REJECTED, DeliveryOutcome.HANDSHAKE)


@dataclass
class PruneResult:
    cutoff: datetime
    events: int = 0
    attempts: int = 0
    deliveries: int = 0
    rejected: int = 0
    snapshots: int = 0
    outbox_messages: int = 0
    outbox_attempts: int = 0
    idempotency_keys: int = 0
    notifications: int = 0
    dry_run: bool = False


def minimum_keep(settings: Settings) -> timedelta:
    """The shortest retention allowed: the provider floor, or the longest lookback if longer."""
    lookbacks = [timedelta(hours=s.initial_lookback_hours) for s in settings.sources if s.enabled]
    return max([FLOOR, *lookbacks])


def _ended_before(cutoff: datetime) -> list[ColumnElement[bool]]:
    """Ended before the cutoff, and no open conflict waits on it (an operator still needs both
    versions: the event's body and the later delivery's)."""
    e, d = INBOX_EVENTS, DISCREPANCIES
    waiting = exists().where(
        d.c.source == e.c.source,
        d.c.kind == DiscrepancyKind.CONFLICT,
        d.c.record_key == e.c.event_id,
        d.c.status == DiscrepancyStatus.OPEN,
    )
    return [e.c.status.in_(ENDED), e.c.received_at < cutoff, ~waiting]


def _sent_before(cutoff: datetime) -> Select[tuple[int]]:
    o = OUTBOX
    return select(o.c.id).where(o.c.status == OutboxStatus.SENT, o.c.sent_at < cutoff)


def _told_before(cutoff: datetime) -> ColumnElement[bool]:
    """Notifications made before the cutoff and done with (a pending one may still be sent):
    what they record is older than anything a target is told about, so none is told again."""
    n = NOTIFICATIONS
    return (n.c.created_at < cutoff) & (n.c.status != NotificationStatus.PENDING)


def _count(conn: Connection, cutoff: datetime, now: datetime) -> PruneResult:
    e, a, d, q = INBOX_EVENTS, PROCESSING_ATTEMPTS, DELIVERIES, QUEUE_SNAPSHOTS
    sent = _sent_before(cutoff)
    ended = select(e.c.id).where(*_ended_before(cutoff))
    keys = select(e.c.source, e.c.event_id).where(*_ended_before(cutoff))
    return PruneResult(
        cutoff=cutoff,
        events=conn.execute(select(func.count()).select_from(ended.subquery())).scalar_one(),
        attempts=conn.execute(
            select(func.count()).select_from(a).where(a.c.inbox_event_id.in_(ended))
        ).scalar_one(),
        deliveries=conn.execute(
            select(func.count()).select_from(d).where(tuple_(d.c.source, d.c.event_id).in_(keys))
        ).scalar_one(),
        rejected=conn.execute(
            select(func.count())
            .select_from(d)
            .where(d.c.outcome.in_(NO_EVENT), d.c.received_at < cutoff)
        ).scalar_one(),
        snapshots=conn.execute(
            select(func.count()).select_from(q).where(q.c.at < cutoff)
        ).scalar_one()
        + conn.execute(
            select(func.count()).select_from(OUTBOX_SNAPSHOTS).where(OUTBOX_SNAPSHOTS.c.at < cutoff)
        ).scalar_one(),
        outbox_messages=conn.execute(
            select(func.count()).select_from(sent.subquery())
        ).scalar_one(),
        outbox_attempts=conn.execute(
            select(func.count())
            .select_from(OUTBOX_ATTEMPTS)
            .where(OUTBOX_ATTEMPTS.c.message_id.in_(sent))
        ).scalar_one(),
        idempotency_keys=prune_expired(conn, now, dry_run=True),
        notifications=conn.execute(
            select(func.count()).select_from(NOTIFICATIONS).where(_told_before(cutoff))
        ).scalar_one(),
        dry_run=True,
    )


def prune(
    engine: Engine,
    settings: Settings,
    *,
    keep: timedelta,
    now: datetime,
    actor: str,
    dry_run: bool = False,
    force: bool = False,
    batch: int = 2000,
) -> PruneResult:
    floor = minimum_keep(settings)
    if keep < floor and not force:
        raise ActionRefusedError(
            f"keeping {keep.days} days is less than {floor.days} days (the longest provider retry "
            "window plus margin, or a source's initial_lookback_hours): a late retry would be "
            "stored as a new event and a reconciliation would report pruned events missing; "
            "use --force to prune anyway"
        )
    cutoff = now - keep
    if dry_run:
        with engine.connect() as conn:
            return _count(conn, cutoff, now)
    roll_up(engine, now)  # the dashboard's hourly counts keep what the raw rows held
    e, a, d, q = INBOX_EVENTS, PROCESSING_ATTEMPTS, DELIVERIES, QUEUE_SNAPSHOTS
    result = PruneResult(cutoff=cutoff)
    while True:
        with engine.begin() as conn:
            rows = conn.execute(
                select(e.c.id, e.c.source, e.c.event_id)
                .where(*_ended_before(cutoff))
                .order_by(e.c.id)
                .limit(batch)
            ).all()
            if not rows:
                break
            ids = [r.id for r in rows]
            keys = [(r.source, r.event_id) for r in rows]
            result.attempts += conn.execute(delete(a).where(a.c.inbox_event_id.in_(ids))).rowcount
            result.deliveries += conn.execute(
                delete(d).where(tuple_(d.c.source, d.c.event_id).in_(keys))
            ).rowcount
            result.events += conn.execute(delete(e).where(e.c.id.in_(ids))).rowcount
    while True:
        with engine.begin() as conn:
            ids = list(
                conn.execute(_sent_before(cutoff).order_by(OUTBOX.c.id).limit(batch)).scalars()
            )
            if not ids:
                break
            result.outbox_attempts += conn.execute(
                delete(OUTBOX_ATTEMPTS).where(OUTBOX_ATTEMPTS.c.message_id.in_(ids))
            ).rowcount
            result.outbox_messages += conn.execute(
                delete(OUTBOX).where(OUTBOX.c.id.in_(ids))
            ).rowcount
    with engine.begin() as conn:
        result.idempotency_keys = prune_expired(conn, now)
        result.snapshots += conn.execute(
            delete(OUTBOX_SNAPSHOTS).where(OUTBOX_SNAPSHOTS.c.at < cutoff)
        ).rowcount
        result.rejected = conn.execute(
            delete(d).where(d.c.outcome.in_(NO_EVENT), d.c.received_at < cutoff)
        ).rowcount
        result.snapshots += conn.execute(delete(q).where(q.c.at < cutoff)).rowcount
        result.notifications = conn.execute(
            delete(NOTIFICATIONS).where(_told_before(cutoff))
        ).rowcount
        # schedulers that stopped beating before the cutoff (each start adds a row: host:pid)
        conn.execute(delete(SCHEDULER_HEARTBEATS).where(SCHEDULER_HEARTBEATS.c.beat_at < cutoff))
        record_audit(
            conn,
            actor=actor,
            action="prune",
            target=f"before {cutoff.isoformat()}",
            detail={
                "events": result.events,
                "attempts": result.attempts,
                "deliveries": result.deliveries,
                "rejected": result.rejected,
                "snapshots": result.snapshots,
                "outbox_messages": result.outbox_messages,
                "outbox_attempts": result.outbox_attempts,
                "idempotency_keys": result.idempotency_keys,
                "notifications": result.notifications,
            },
        )
    return result
