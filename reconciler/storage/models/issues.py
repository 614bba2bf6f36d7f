"""Issues: failures grouped by kind, source, type and error signature (``reconciler.issues``),
the failures each group holds, and how far the refresh has read each kind of failure."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Table, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from reconciler.states import IssueKind, IssueStatus
from reconciler.storage.models.base import Base, BigId, _enum


class Issue(Base):
    """One group of failures: unique by its key (kind, source, type, signature), so any number of
    refreshes keep one row per group."""

    __tablename__ = "hookledger_issues"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    kind: Mapped[IssueKind] = mapped_column(_enum(IssueKind, 32))
    source: Mapped[str] = mapped_column(String(255))  # the source, or outbox:<target>
    # the event type (dead events), the discrepancy kind (discrepancies); "" for runs and outbox
    event_type: Mapped[str] = mapped_column(String(255))
    signature: Mapped[str] = mapped_column(String(255))  # reconciler.issues.signature
    sample_error: Mapped[str | None] = mapped_column(Text)  # the newest member's error, as it was
    first_seen: Mapped[datetime]
    last_seen: Mapped[datetime]
    count: Mapped[int] = mapped_column(BigInteger)  # members: failures grouped here
    status: Mapped[IssueStatus] = mapped_column(_enum(IssueStatus))
    acknowledged_by: Mapped[str | None] = mapped_column(String(128))
    acknowledged_at: Mapped[datetime | None]
    resolved_by: Mapped[str | None] = mapped_column(String(128))
    resolved_at: Mapped[datetime | None]
    resolved_reason: Mapped[str | None] = mapped_column(Text)
    reopened_count: Mapped[int] = mapped_column(Integer)

    __table_args__ = (
        UniqueConstraint("kind", "source", "event_type", "signature"),
        Index("ix_hookledger_issues_status_last_seen", "status", "last_seen"),
    )


class IssueMember(Base):
    """One failure of an issue: unique per failing row (``ref``: a dead attempt's, a failed outbox
    attempt's, a failed run's or a discrepancy's id), so a row read twice counts once."""

    __tablename__ = "hookledger_issue_members"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    issue_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"),
        ForeignKey("hookledger_issues.id", ondelete="CASCADE"),
    )
    kind: Mapped[IssueKind] = mapped_column(_enum(IssueKind, 32))
    ref: Mapped[int] = mapped_column(BigInteger)
    # what failed: the inbox event's, outbox message's, run's or discrepancy's row id and name
    item_id: Mapped[int] = mapped_column(BigInteger)
    item: Mapped[str] = mapped_column(String(400))
    at: Mapped[datetime]  # when it failed

    __table_args__ = (
        UniqueConstraint("kind", "ref"),
        Index("ix_hookledger_issue_members_issue_id_at", "issue_id", "at"),
    )


class IssueMark(Base):
    """Up to when each kind of failure has been read into issues (a refresh reads a little before
    it again: rows committed late are caught, and counted once thanks to the members' key)."""

    __tablename__ = "hookledger_issue_marks"

    kind: Mapped[IssueKind] = mapped_column(_enum(IssueKind, 32), primary_key=True)
    upto: Mapped[datetime]


ISSUES = cast(Table, Issue.__table__)
ISSUE_MEMBERS = cast(Table, IssueMember.__table__)
ISSUE_MARKS = cast(Table, IssueMark.__table__)
