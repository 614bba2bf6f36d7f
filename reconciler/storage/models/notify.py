"""Notifications: the configured targets and each message sent or held back."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Index, Integer, String, Table, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from reconciler.states import NotificationStatus
from reconciler.storage.models.base import Base, BigId, _enum


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


NOTIFY_TARGETS = cast(Table, NotifyTarget.__table__)
NOTIFICATIONS = cast(Table, Notification.__table__)
