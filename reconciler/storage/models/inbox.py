"""The inbox: events as received, each delivery of them, each processing attempt, the audit log."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from reconciler.states import (
    AttemptOutcome,
    DeliveryOutcome,
    ErrorClass,
    EventOrigin,
    EventStatus,
)
from reconciler.storage.models.base import Base, BigId, _enum, _same_as


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
    # Raised by each replay: the applied mark is per (source, event id, replays), so a replay runs
    # the handler again while a retry of the same round finds the mark (inbox.applied).
    replays: Mapped[int] = mapped_column(Integer, server_default="0")
    # Attempts that never came back: timed out ([worker] handler_timeout_seconds) or their worker
    # died with the lease; at [worker] max_hangs the event is dead with class ``hung``.
    hangs: Mapped[int] = mapped_column(Integer, server_default="0")
    # when the running attempt started (NULL while none runs): a lease that runs out on a started
    # attempt is a hang; on an event of the batch not yet started, it is not
    attempt_started_at: Mapped[datetime | None]

    __table_args__ = (
        UniqueConstraint("source", "event_id"),
        Index("ix_inbox_events_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_inbox_events_source_received_at", "source", "received_at"),
        Index("ix_inbox_events_source_object", "source", "object_type", "object_id"),
        Index("ix_inbox_events_correlation_id", "correlation_id"),
        # the Events page lists every source newest first, a page at a time (keyset on both)
        Index("ix_inbox_events_received_at_id", "received_at", "id"),
        # the lease keeper renews what a worker holds by owner: a few rows, never a table scan
        Index(
            "ix_inbox_events_lease_owner",
            "lease_owner",
            sqlite_where=text("lease_owner IS NOT NULL"),
            postgresql_where=text("lease_owner IS NOT NULL"),
        ),
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
    # the status the attempt left its event in, or interrupted (AttemptOutcome: the same strings)
    outcome: Mapped[AttemptOutcome] = mapped_column(_enum(AttemptOutcome))
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


class Applied(Base):
    """The applied mark: one row per event (and replay round) whose handler's writes committed, in
    the transaction that carried them. Its primary key is what makes a retry after a crash, or a
    second runner, unable to apply the event again (``inbox.applied``). ``hookledger init`` creates
    it in the inbox's database and in ``[business] url``'s."""

    __tablename__ = "hookledger_applied"

    source: Mapped[str] = mapped_column(String(64), primary_key=True)
    event_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    replay: Mapped[int] = mapped_column(Integer, primary_key=True)
    applied_at: Mapped[datetime]
    attempt: Mapped[int] = mapped_column(Integer)
    worker: Mapped[str] = mapped_column(String(128))


INBOX_EVENTS = cast(Table, InboxEvent.__table__)
APPLIED = cast(Table, Applied.__table__)
DELIVERIES = cast(Table, Delivery.__table__)
PROCESSING_ATTEMPTS = cast(Table, ProcessingAttempt.__table__)
AUDIT_LOG = cast(Table, AuditLog.__table__)
