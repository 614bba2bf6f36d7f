"""Reconciliation history, cursor positions and the next scheduled run, for the dashboard."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from reconciler.config import Settings
from reconciler.cron import trigger_for
from reconciler.storage.models import CURSORS, RECON_RUNS


def recent_runs(
    conn: Connection, sources: Sequence[str] = (), limit: int = 100
) -> list[dict[str, Any]]:
    """The newest runs first, with their duration in seconds."""
    stmt = (
        select(
            RECON_RUNS.c.run_id,
            RECON_RUNS.c.source,
            RECON_RUNS.c.trigger,
            RECON_RUNS.c.status,
            RECON_RUNS.c.started_at,
            RECON_RUNS.c.finished_at,
            RECON_RUNS.c.window_start,
            RECON_RUNS.c.window_end,
            RECON_RUNS.c.records_scanned,
            RECON_RUNS.c.counts,
            RECON_RUNS.c.error,
        )
        .order_by(RECON_RUNS.c.started_at.desc(), RECON_RUNS.c.id.desc())
        .limit(limit)
    )
    if sources:
        stmt = stmt.where(RECON_RUNS.c.source.in_(sources))
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
