"""The outgoing side: the transactional outbox with its attempts and snapshots, and Idempotency-Key
records.
"""

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
)
from sqlalchemy.orm import Mapped, mapped_column

from reconciler.states import ErrorClass, IdempotencyStatus, OutboxStatus
from reconciler.storage.models.base import Base, BigId, _enum, _same_as


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
    # When it went dead (None unless dead): "recover since" asks when a message died, not when
    # it was written
    dead_at: Mapped[datetime | None]

    __table_args__ = (
        UniqueConstraint("target", "key"),
        Index("ix_outbox_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_outbox_target_dead_at", "target", "dead_at"),
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


class OutboxPause(Base):
    """A target an operator paused (Svix's "disable endpoint"): its messages stay pending and no
    publisher claims them until the row is deleted (resume). Who and why are on the row while it
    lasts; the audit log keeps every pause and resume."""

    __tablename__ = "outbox_pauses"

    target: Mapped[str] = mapped_column(String(64), primary_key=True)
    paused_by: Mapped[str] = mapped_column(String(128))
    paused_at: Mapped[datetime]
    reason: Mapped[str] = mapped_column(Text)


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


OUTBOX = cast(Table, OutboxMessage.__table__)
OUTBOX_ATTEMPTS = cast(Table, OutboxAttempt.__table__)
OUTBOX_SNAPSHOTS = cast(Table, OutboxSnapshot.__table__)
OUTBOX_PAUSES = cast(Table, OutboxPause.__table__)
IDEMPOTENCY_KEYS = cast(Table, IdempotencyKey.__table__)
