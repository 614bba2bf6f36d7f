"""What the dashboard and the scheduler keep over time: heartbeats, queue snapshots, hourly rollups."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import BigInteger, Index, Integer, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from reconciler.storage.models.base import Base, BigId


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


class Silence(Base):
    """A health-strip warning an operator silenced: who, why and until when (each one audited)."""

    __tablename__ = "health_silences"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    signal: Mapped[str] = mapped_column(String(128))  # the signal's label ("Scheduler")
    silenced_by: Mapped[str] = mapped_column(String(128))
    reason: Mapped[str] = mapped_column(String(500))
    created_at: Mapped[datetime]
    until: Mapped[datetime]

    __table_args__ = (Index("ix_health_silences_signal_until", "signal", "until"),)


SCHEDULER_HEARTBEATS = cast(Table, SchedulerHeartbeat.__table__)
HEALTH_SILENCES = cast(Table, Silence.__table__)
QUEUE_SNAPSHOTS = cast(Table, QueueSnapshot.__table__)
HOURLY_COUNTS = cast(Table, HourlyCount.__table__)
ROLLUP_MARKS = cast(Table, RollupMark.__table__)
QUEUE_SNAPSHOTS_HOURLY = cast(Table, QueueSnapshotHourly.__table__)
