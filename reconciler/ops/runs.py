"""Reconciliation history, cursor positions and the next scheduled run, for the dashboard."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from reconciler.config import Settings
from reconciler.schedule import trigger_for
from reconciler.storage.models import CURSORS, RECON_RUNS

R = RECON_RUNS


def recent_runs(
    conn: Connection, sources: Sequence[str] = (), limit: int = 100
) -> list[dict[str, Any]]:
    """The newest runs first, with their duration in seconds."""
    stmt = (
        select(
            R.c.run_id,
            R.c.source,
            R.c.trigger,
            R.c.status,
            R.c.started_at,
            R.c.finished_at,
            R.c.window_start,
            R.c.window_end,
            R.c.records_scanned,
            R.c.counts,
            R.c.error,
        )
        .order_by(R.c.started_at.desc(), R.c.id.desc())
        .limit(limit)
    )
    if sources:
        stmt = stmt.where(R.c.source.in_(sources))
    out = []
    for row in conn.execute(stmt):
        item = dict(row._mapping)
        start, end = item["started_at"], item["finished_at"]
        item["duration_seconds"] = (end - start).total_seconds() if start and end else None
        out.append(item)
    return out


def cursor_positions(conn: Connection) -> list[dict[str, Any]]:
    return [
        dict(r._mapping)
        for r in conn.execute(
            select(
                CURSORS.c.source, CURSORS.c.position, CURSORS.c.updated_at, CURSORS.c.run_id
            ).order_by(CURSORS.c.source)
        )
    ]


def next_scheduled_run(settings: Settings, now: datetime) -> datetime | None:
    """When ``hookledger schedule`` next reconciles (from the configured cron and time zone)."""
    fire: datetime | None = trigger_for(settings).get_next_fire_time(None, now)
    return fire
