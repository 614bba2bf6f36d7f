"""Typed SQLAlchemy 2.x models of the inbox.

Statuses and outcomes are Enums stored as short strings (no native enum types), so migrations are
identical on SQLite and PostgreSQL. Constraint names follow one naming convention.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from reconciler.states import DeliveryOutcome as DeliveryOutcome
from reconciler.states import DiscrepancyKind as DiscrepancyKind
from reconciler.states import DiscrepancyStatus as DiscrepancyStatus
from reconciler.states import ErrorClass as ErrorClass
from reconciler.states import EventOrigin as EventOrigin
from reconciler.states import EventStatus as EventStatus
from reconciler.states import IdempotencyStatus as IdempotencyStatus
from reconciler.states import NotificationStatus as NotificationStatus
from reconciler.states import OutboxStatus as OutboxStatus
from reconciler.states import RunStatus as RunStatus
from reconciler.storage.types import UTCDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# BIGINT primary keys on PostgreSQL, INTEGER (rowid alias, autoincrementing) on SQLite.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def _same_as(column: str) -> Any:
    """An insert default: the value given for another column of the same row."""
    return lambda context: context.get_current_parameters()[column]


def _enum(cls: type[enum.Enum]) -> Enum:
    return Enum(
        cls,
        native_enum=False,
        length=16,
        values_callable=lambda e: [m.value for m in e],
        validate_strings=True,
        create_constraint=False,
    )


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON()}


class InboxEvent(Base):
    __tablename__ = "inbox_events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(64))
    event_id: Mapped[str] = mapped_column(String(255))
    event_type: Mapped[str | None] = mapped_column(String(255))
    object_type: Mapped[str | None] = mapped_column(String(128))
    object_id: Mapped[str | None] = mapped_column(String(255))
    occurred_at: Mapped[datetime | None]  # the provider's own timestamp of the event
    api_version: Mapped[str | None] = mapped_column(String(64))
    # Stripe Connect: the connected account (the listing of a source with `account` holds only its)
    account: Mapped[str | None] = mapped_column(String(255))
    body: Mapped[bytes] = mapped_column(LargeBinary)  # exactly as received: signatures cover it
    content_type: Mapped[str | None] = mapped_column(String(255))
    headers: Mapped[dict[str, Any]]  # relevant headers, signature values masked
    received_at: Mapped[datetime]
    # When the event last became due: its receipt, a replay or an operator's retry (not a worker's
    # backoff). Queue age and `stuck` count from here, so a replayed event is not 10 hours old.
    queued_at: Mapped[datetime] = mapped_column(default=_same_as("received_at"))
    origin: Mapped[EventOrigin] = mapped_column(_enum(EventOrigin))
    status: Mapped[EventStatus] = mapped_column(_enum(EventStatus))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # When the event may next be claimed: due time while pending/failed, lease expiry while processing.
    next_attempt_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    error_class: Mapped[ErrorClass | None] = mapped_column(_enum(ErrorClass))
    processed_at: Mapped[datetime | None]
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None]
    correlation_id: Mapped[str] = mapped_column(String(64))
    # SHA-256 of the content (connectors.fingerprint); NULL on rows stored before migration 0011
    fingerprint: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (
        UniqueConstraint("source", "event_id"),
        Index("ix_inbox_events_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_inbox_events_source_received_at", "source", "received_at"),
        Index("ix_inbox_events_source_object", "source", "object_type", "object_id"),
        Index("ix_inbox_events_correlation_id", "correlation_id"),
        # the Events page lists every source newest first, a page at a time (keyset on both)
        Index("ix_inbox_events_received_at_id", "received_at", "id"),
    )


class Delivery(Base):
    """Append-only log of every HTTP delivery, accepted or not."""

    __tablename__ = "deliveries"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(64))
    event_id: Mapped[str | None] = mapped_column(String(255))
    delivery_id: Mapped[str | None] = mapped_column(String(255))  # the provider's per-delivery id
    received_at: Mapped[datetime]
    outcome: Mapped[DeliveryOutcome] = mapped_column(_enum(DeliveryOutcome))
    status_code: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str | None] = mapped_column(String(512))
    remote_addr: Mapped[str | None] = mapped_column(String(64))
    # a conflicting redelivery only: its content fingerprint and raw body (the stored event keeps
    # the first), so that an operator can compare them and apply the later one
    fingerprint: Mapped[str | None] = mapped_column(String(64))
    body: Mapped[bytes | None] = mapped_column(LargeBinary)

    __table_args__ = (
        # time-bucketed counts per source and outcome are answered from these indexes alone: one
        # source (dashboard filter) or all sources over a time range (Overview)
        Index("ix_deliveries_source_received_at_outcome", "source", "received_at", "outcome"),
        Index("ix_deliveries_received_at_source_outcome", "received_at", "source", "outcome"),
        Index("ix_deliveries_source_event_id", "source", "event_id"),
    )


class ProcessingAttempt(Base):
    """One row per attempt a worker made at an event."""

    __tablename__ = "processing_attempts"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    inbox_event_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"),
        ForeignKey("inbox_events.id", ondelete="CASCADE"),
    )
    # Copied from the event so time-bucketed outcomes per source need no join (dashboard Overview).
    source: Mapped[str] = mapped_column(String(64))
    attempt: Mapped[int] = mapped_column(Integer)
    worker: Mapped[str] = mapped_column(String(128))
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]
    outcome: Mapped[EventStatus] = mapped_column(_enum(EventStatus))
    error_class: Mapped[ErrorClass | None] = mapped_column(_enum(ErrorClass))
    error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("ix_processing_attempts_inbox_event_id", "inbox_event_id"),
        Index(
            "ix_processing_attempts_finished_at_source_outcome", "finished_at", "source", "outcome"
        ),
    )


class AuditLog(Base):
    """Who did what to which event or record, when, and why."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    actor: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(64))
    source: Mapped[str | None] = mapped_column(String(64))
    event_id: Mapped[str | None] = mapped_column(String(255))
    target: Mapped[str | None] = mapped_column(String(255))
    reason: Mapped[str | None] = mapped_column(Text)
    detail: Mapped[dict[str, Any] | None]

    __table_args__ = (
        Index("ix_audit_log_source_event_id", "source", "event_id"),
        Index("ix_audit_log_at", "at"),
    )


class SourceCursor(Base):
    """Where each source's connector resumes; written with the page results it follows."""

    __tablename__ = "cursors"

    source: Mapped[str] = mapped_column(String(64), primary_key=True)
    position: Mapped[dict[str, Any]]
    updated_at: Mapped[datetime]
    run_id: Mapped[str | None] = mapped_column(String(64))


class OrphanWatermark(Base):
    """Up to when each source's inbox webhook events have been checked for orphans."""

    __tablename__ = "orphan_watermarks"

    source: Mapped[str] = mapped_column(String(64), primary_key=True)
    checked_until: Mapped[datetime]  # every webhook event received up to here was checked
    updated_at: Mapped[datetime]
    run_id: Mapped[str | None] = mapped_column(String(64))


class ReconRun(Base):
    """One reconciliation of one source."""

    __tablename__ = "recon_runs"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(36), unique=True)
    source: Mapped[str] = mapped_column(String(64))
    trigger: Mapped[str] = mapped_column(String(16))  # schedule | cli | dashboard
    status: Mapped[RunStatus] = mapped_column(_enum(RunStatus))
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    window_start: Mapped[datetime | None]
    window_end: Mapped[datetime | None]
    records_scanned: Mapped[int] = mapped_column(Integer, default=0)
    counts: Mapped[dict[str, Any]]
    error: Mapped[str | None] = mapped_column(Text)
    detail: Mapped[dict[str, Any] | None]  # gaps, detection delay median/max, pages

    __table_args__ = (Index("ix_recon_runs_source_started_at", "source", "started_at"),)


class Discrepancy(Base):
    """One row per natural key (source, kind, record key, field); reruns update it, never duplicate it."""

    __tablename__ = "discrepancies"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(64))
    kind: Mapped[DiscrepancyKind] = mapped_column(_enum(DiscrepancyKind))
    record_key: Mapped[str] = mapped_column(String(400))
    field: Mapped[str] = mapped_column(String(128), default="")
    event_id: Mapped[str | None] = mapped_column(String(255))
    event_type: Mapped[str | None] = mapped_column(String(255))
    object_type: Mapped[str | None] = mapped_column(String(128))
    object_id: Mapped[str | None] = mapped_column(String(255))
    source_value: Mapped[str | None] = mapped_column(Text)
    local_value: Mapped[str | None] = mapped_column(Text)
    amount: Mapped[int | None] = mapped_column(BigInteger)
    currency: Mapped[str | None] = mapped_column(String(8))
    cause: Mapped[str | None] = mapped_column(String(32))
    recover_by: Mapped[datetime | None]
    occurred_at: Mapped[datetime | None]
    detection_delay_seconds: Mapped[float | None]
    first_seen_at: Mapped[datetime]
    last_seen_at: Mapped[datetime]
    first_run_id: Mapped[str] = mapped_column(String(36))
    last_run_id: Mapped[str] = mapped_column(String(36))
    status: Mapped[DiscrepancyStatus] = mapped_column(_enum(DiscrepancyStatus))
    resolution: Mapped[str | None] = mapped_column(Text)
    resolved_at: Mapped[datetime | None]
    detail: Mapped[dict[str, Any] | None]

    __table_args__ = (
        UniqueConstraint("source", "kind", "record_key", "field"),
        Index("ix_discrepancies_status_source_kind", "status", "source", "kind"),
        Index("ix_discrepancies_last_seen_at", "last_seen_at"),
        Index("ix_discrepancies_last_run_id", "last_run_id"),
    )


class ReconSeen(Base):
    """Event ids the current scan of a source has seen (for the orphan anti-join): one row per source
    page, its ids as a JSON array. Written with the page, so a scan interrupted and resumed by a later
    run still has them; cleared when it completes.

    No index on the ids, and no row per id: the only reader is the anti-join, once per scan, which
    unpacks the arrays (``json_each`` / ``json_array_elements_text``) into an automatic index (SQLite)
    or a hash (PostgreSQL). A row per id cost ~100 heap (and primary key) inserts a page, all in the
    WAL (~25 kB a page on PostgreSQL), and the end of the scan deleted them again; an index on the id
    cost more than the rest of the run (ids come in random order: every page touched ~100 leaves). An
    id listed twice (overlap, a resumed scan) is in two arrays, which the anti-join does not mind.
    ``occurred_epoch`` and ``newest_epoch`` (seconds) are the oldest and newest occurred time of the
    page: the table serves the scan's window (from the minimum of the one to the maximum of the
    other). A row of records listed again (``Page.relisted``) has no ``occurred_epoch``: it widens
    the window only upwards. On PostgreSQL a page's row stays inline and uncompressed up to a
    heap page (``toast_tuple_target``, migration 0007): 100 ids are over the default TOAST threshold."""

    __tablename__ = "recon_seen"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(64))
    event_ids: Mapped[str] = mapped_column(Text)  # a JSON array of strings
    occurred_epoch: Mapped[float | None] = mapped_column(Float)
    newest_epoch: Mapped[float | None] = mapped_column(Float)


class ReconLease(Base):
    """At most one reconciliation per source at a time, across processes and machines."""

    __tablename__ = "recon_leases"

    source: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128))
    acquired_at: Mapped[datetime]
    expires_at: Mapped[datetime]


class SchedulerHeartbeat(Base):
    """Each running ``hookledger schedule`` says it is alive here every snapshot interval, so the
    dashboard can tell a quiet night from a dead scheduler."""

    __tablename__ = "scheduler_heartbeats"

    owner: Mapped[str] = mapped_column(String(128), primary_key=True)  # host:pid
    started_at: Mapped[datetime]
    beat_at: Mapped[datetime]


class QueueSnapshot(Base):
    """Per-source queue depth over time, recorded every minute by the scheduler."""

    __tablename__ = "queue_snapshots"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    source: Mapped[str] = mapped_column(String(64))
    unprocessed: Mapped[int] = mapped_column(Integer)
    oldest_age_seconds: Mapped[float]

    # covering: the Overview's history charts read (source, at) ranges and both values from the index
    __table_args__ = (
        Index(
            "ix_queue_snapshots_source_at_values",
            "source",
            "at",
            "unprocessed",
            "oldest_age_seconds",
        ),
    )


class HourlyCount(Base):
    """Deliveries and processing attempts counted per hour, source and outcome: what the dashboard
    reads for ranges of days instead of every raw row. Rolled up by the scheduler up to the mark in
    ``rollup_marks``; rows after the mark are read raw, so figures are exact either way."""

    __tablename__ = "hourly_counts"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)  # delivery | attempt
    hour: Mapped[datetime] = mapped_column(primary_key=True)  # UTC start of the hour
    source: Mapped[str] = mapped_column(String(64), primary_key=True)
    outcome: Mapped[str] = mapped_column(String(16), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)


class RollupMark(Base):
    """Every raw row of ``kind`` older than ``upto`` (an hour boundary) is in ``hourly_counts``."""

    __tablename__ = "rollup_marks"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    upto: Mapped[datetime]


class QueueSnapshotHourly(Base):
    """Hourly maxima of the queue snapshots, kept by the snapshot job as it records each snapshot."""

    __tablename__ = "queue_snapshots_hourly"

    source: Mapped[str] = mapped_column(String(64), primary_key=True)
    hour: Mapped[datetime] = mapped_column(primary_key=True)
    max_unprocessed: Mapped[int] = mapped_column(Integer)
    max_oldest_age_seconds: Mapped[float]


class OutboxMessage(Base):
    """An outgoing call, written in the transaction of the business change that caused it and sent
    by a publisher after that commit (the transactional outbox). ``key`` is the Idempotency-Key the
    target receives on every attempt: unique per target, so writing the same message twice (a
    replayed event, a re-run handler) keeps one row."""

    __tablename__ = "outbox"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    target: Mapped[str] = mapped_column(String(64))  # a [[outbox.targets]] name
    key: Mapped[str] = mapped_column(String(255))
    payload: Mapped[bytes] = mapped_column(LargeBinary)  # the body sent, byte for byte
    content_type: Mapped[str] = mapped_column(String(255))
    headers: Mapped[
        dict[str, Any]
    ]  # the writer's own headers (never secrets: they come from config)
    status: Mapped[OutboxStatus] = mapped_column(_enum(OutboxStatus))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # When the message may next be claimed: due time while pending/failed, lease expiry while sending.
    next_attempt_at: Mapped[datetime]
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    error_class: Mapped[ErrorClass | None] = mapped_column(_enum(ErrorClass))
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    correlation_id: Mapped[str] = mapped_column(String(64))
    # the inbox event whose handler wrote it (None: written by application code)
    source: Mapped[str | None] = mapped_column(String(64))
    event_id: Mapped[str | None] = mapped_column(String(255))
    # messages of one object to a target with order_by_object are sent one after another, in id order
    object_key: Mapped[str | None] = mapped_column(String(400))
    created_at: Mapped[datetime]
    # When the message last became due: written, or replayed (its age counts from here).
    queued_at: Mapped[datetime] = mapped_column(default=_same_as("created_at"))
    sent_at: Mapped[datetime | None]

    __table_args__ = (
        UniqueConstraint("target", "key"),
        Index("ix_outbox_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_outbox_target_object_key_id", "target", "object_key", "id"),
        Index("ix_outbox_source_event_id", "source", "event_id"),
        Index("ix_outbox_correlation_id", "correlation_id"),
    )


class OutboxAttempt(Base):
    """One row per attempt a publisher made at an outgoing message."""

    __tablename__ = "outbox_attempts"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    message_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"),
        ForeignKey("outbox.id", ondelete="CASCADE"),
    )
    target: Mapped[str] = mapped_column(String(64))  # copied: time-bucketed counts need no join
    attempt: Mapped[int] = mapped_column(Integer)
    publisher: Mapped[str] = mapped_column(String(128))
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]
    outcome: Mapped[OutboxStatus] = mapped_column(_enum(OutboxStatus))  # sent | failed | dead
    error_class: Mapped[ErrorClass | None] = mapped_column(_enum(ErrorClass))
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("ix_outbox_attempts_message_id", "message_id"),
        Index("ix_outbox_attempts_finished_at_target_outcome", "finished_at", "target", "outcome"),
    )


class OutboxSnapshot(Base):
    """Per-target unsent count and oldest unsent age over time, recorded with the queue snapshots."""

    __tablename__ = "outbox_snapshots"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    target: Mapped[str] = mapped_column(String(64))
    unsent: Mapped[int] = mapped_column(Integer)
    oldest_age_seconds: Mapped[float]

    __table_args__ = (
        Index(
            "ix_outbox_snapshots_target_at_values", "target", "at", "unsent", "oldest_age_seconds"
        ),
    )


class IdempotencyKey(Base):
    """A client's Idempotency-Key on the team's own API (``reconciler.idempotency``): the first
    request's fingerprint and, once it finished, its response, which answers every repeat."""

    __tablename__ = "idempotency_keys"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    owner: Mapped[str] = mapped_column(String(255))  # who may reuse the key (e.g. the API client)
    key: Mapped[str] = mapped_column(String(255))
    fingerprint: Mapped[str] = mapped_column(String(64))  # SHA-256 of method, path, query and body
    method: Mapped[str] = mapped_column(String(16))
    path: Mapped[str] = mapped_column(String(2048))
    status: Mapped[IdempotencyStatus] = mapped_column(_enum(IdempotencyStatus))
    lease_owner: Mapped[str | None] = mapped_column(String(64))  # the request running it
    lease_expires_at: Mapped[datetime | None]
    response_status: Mapped[int | None] = mapped_column(Integer)
    response_headers: Mapped[dict[str, Any] | None]
    response_body: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime]
    completed_at: Mapped[datetime | None]
    expires_at: Mapped[datetime]  # after this the key is forgotten (and pruned)

    __table_args__ = (
        UniqueConstraint("owner", "key"),
        Index("ix_idempotency_keys_expires_at", "expires_at"),
    )


class NotifyTarget(Base):
    """When each ``[[notify]]`` target was first seen: it is told about what happened after that,
    not about the history before it was configured."""

    __tablename__ = "notify_targets"

    target: Mapped[str] = mapped_column(String(64), primary_key=True)
    since: Mapped[datetime]


class Notification(Base):
    """One notification to one target about one thing (a run, new dead letters of a source, a
    missed slot): the unique (target, key) is what makes it sent once, by any number of processes."""

    __tablename__ = "notifications"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    target: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(32))  # discrepancies | dead_letters | run_failed | ...
    subject: Mapped[str] = mapped_column(String(128))  # the source (or "" for the schedule)
    fact_at: Mapped[datetime]  # when what it reports happened (dead letters: the newest one)
    created_at: Mapped[datetime]
    status: Mapped[NotificationStatus] = mapped_column(_enum(NotificationStatus))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[
        datetime | None
    ]  # due time while pending; a sender's lease while sending
    sent_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    payload: Mapped[dict[str, Any]]  # the facts; each target kind renders its own message from them

    __table_args__ = (
        UniqueConstraint("target", "key"),
        Index("ix_notifications_status_next_attempt_at", "status", "next_attempt_at"),
        Index(
            "ix_notifications_target_kind_subject_fact_at", "target", "kind", "subject", "fact_at"
        ),
        Index("ix_notifications_target_sent_at", "target", "sent_at"),
    )


# Typed handles on the tables for Core statements (``__table__`` is typed as a FromClause).
INBOX_EVENTS = cast(Table, InboxEvent.__table__)
DELIVERIES = cast(Table, Delivery.__table__)
PROCESSING_ATTEMPTS = cast(Table, ProcessingAttempt.__table__)
AUDIT_LOG = cast(Table, AuditLog.__table__)
CURSORS = cast(Table, SourceCursor.__table__)
ORPHAN_WATERMARKS = cast(Table, OrphanWatermark.__table__)
RECON_RUNS = cast(Table, ReconRun.__table__)
DISCREPANCIES = cast(Table, Discrepancy.__table__)
RECON_SEEN = cast(Table, ReconSeen.__table__)
RECON_LEASES = cast(Table, ReconLease.__table__)
QUEUE_SNAPSHOTS = cast(Table, QueueSnapshot.__table__)
SCHEDULER_HEARTBEATS = cast(Table, SchedulerHeartbeat.__table__)
HOURLY_COUNTS = cast(Table, HourlyCount.__table__)
ROLLUP_MARKS = cast(Table, RollupMark.__table__)
QUEUE_SNAPSHOTS_HOURLY = cast(Table, QueueSnapshotHourly.__table__)
OUTBOX = cast(Table, OutboxMessage.__table__)
OUTBOX_ATTEMPTS = cast(Table, OutboxAttempt.__table__)
OUTBOX_SNAPSHOTS = cast(Table, OutboxSnapshot.__table__)
IDEMPOTENCY_KEYS = cast(Table, IdempotencyKey.__table__)
NOTIFY_TARGETS = cast(Table, NotifyTarget.__table__)
NOTIFICATIONS = cast(Table, Notification.__table__)
