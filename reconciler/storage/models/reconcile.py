"""Reconciliation: each source's cursor and orphan watermark, runs, discrepancies, the ids a scan
saw, the per-source lease.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Float,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from reconciler.states import DiscrepancyKind, DiscrepancyStatus, RunStatus
from reconciler.storage.models.base import Base, BigId, _enum


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


CURSORS = cast(Table, SourceCursor.__table__)
ORPHAN_WATERMARKS = cast(Table, OrphanWatermark.__table__)
RECON_RUNS = cast(Table, ReconRun.__table__)
DISCREPANCIES = cast(Table, Discrepancy.__table__)
RECON_SEEN = cast(Table, ReconSeen.__table__)
RECON_LEASES = cast(Table, ReconLease.__table__)
