"""A run's row in ``recon_runs``: recorded when it starts (with the source's lease), finished with
its summary (and the lease given back)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import Connection, func, insert, select, update

from reconciler.reconcile.export import money_impact
from reconciler.reconcile.lease import acquire, holder, release
from reconciler.reconcile.summary import RunSummary
from reconciler.storage.models import DISCREPANCIES, RECON_RUNS, DiscrepancyStatus, RunStatus

log = logging.getLogger(__name__)
runs = RECON_RUNS


def start(
    conn: Connection,
    summary: RunSummary,
    owner: str,
    trigger: str,
    now: datetime,
    ttl: timedelta,
    slot: datetime | None = None,
) -> bool:
    """Take the source's lease and record the run; False (the run recorded as skipped) when another
    reconciliation holds it, or (``slot``: the scheduled time this run is for) when a run of the
    same trigger succeeded since that time: with several schedulers, one run a slot."""
    if not acquire(conn, summary.source, owner, now, ttl):
        held = holder(conn, summary.source)
        return _skipped(
            conn,
            summary,
            owner,
            trigger,
            now,
            "another reconciliation of this source is running"
            + (f": lease {held.describe()}" if held else ""),
        )
    if slot is not None:  # (the lease orders the schedulers: this check cannot race)
        done = conn.execute(
            select(runs.c.run_id)
            .where(
                runs.c.source == summary.source,
                runs.c.trigger == trigger,
                runs.c.status == RunStatus.SUCCEEDED,
                runs.c.started_at >= slot,
            )
            .limit(1)
        ).scalar()
        if done is not None:
            release(conn, summary.source, owner)
            return _skipped(
                conn,
                summary,
                owner,
                trigger,
                now,
                f"the run scheduled for {slot.isoformat()} already ran (run {done})",
            )
    # A run still "running" without the lease died with its process: say so in the history.
    conn.execute(
        update(runs)
        .where(runs.c.source == summary.source, runs.c.status == RunStatus.RUNNING)
        .values(
            status=RunStatus.FAILED,
            finished_at=now,
            error="abandoned: its process stopped before the run finished",
        )
    )
    _insert(conn, summary, owner, trigger, now, RunStatus.RUNNING)
    return True


def finish(conn: Connection, summary: RunSummary, owner: str, now: datetime) -> None:
    """The run's outcome and what is open after it; the lease given back."""
    d = DISCREPANCIES
    # first found by this run (the alert "reconciliation found new discrepancies" and the
    # notifications read it): every such row was last seen by it too, which the last_run_id index finds
    new_by_kind = {
        str(kind): int(n)
        for kind, n in conn.execute(
            select(d.c.kind, func.count())
            .where(d.c.last_run_id == summary.run_id, d.c.first_run_id == summary.run_id)
            .group_by(d.c.kind)
        )
    }
    new = sum(new_by_kind.values())
    new_money = money_impact(conn, (summary.source,), new_in_run=summary.run_id) if new else []
    summary.open_after = open_by_kind(conn, summary.source)
    conn.execute(
        update(runs)
        .where(runs.c.run_id == summary.run_id)
        .values(
            status=summary.status,
            finished_at=now,
            window_start=summary.window_start,
            window_end=summary.window_end,
            records_scanned=summary.records_scanned,
            counts=summary.found,
            error=summary.error,
            detail={
                "owner": owner,
                "pages": summary.pages,
                "resolved": summary.resolved,
                "new": int(new),
                "new_by_kind": new_by_kind,
                "new_money": new_money,
                "open": summary.open_after,
                "quiet": summary.quiet,
                "gaps": summary.gaps,
                "detection_delay_median_seconds": summary.detection_delay_median_seconds,
                "detection_delay_max_seconds": summary.detection_delay_max_seconds,
            },
        )
    )
    release(conn, summary.source, owner)


def _insert(
    conn: Connection,
    summary: RunSummary,
    owner: str,
    trigger: str,
    now: datetime,
    status: RunStatus,
) -> None:
    skipped = status is RunStatus.SKIPPED
    conn.execute(
        insert(runs).values(
            run_id=summary.run_id,
            source=summary.source,
            trigger=trigger,
            status=status,
            started_at=now,
            finished_at=now if skipped else None,
            records_scanned=0,
            counts={},
            error=summary.error if skipped else None,
            detail={"owner": owner},
        )
    )


def _skipped(
    conn: Connection, summary: RunSummary, owner: str, trigger: str, now: datetime, why: str
) -> bool:
    summary.status, summary.error = RunStatus.SKIPPED.value, why
    _insert(conn, summary, owner, trigger, now, RunStatus.SKIPPED)
    log.info("%s; skipped", why, extra={"source": summary.source})
    return False


def open_by_kind(conn: Connection, source: str) -> dict[str, int]:
    """The source's open discrepancies by kind, as they stand now."""
    d = DISCREPANCIES
    return {
        str(kind): int(n)
        for kind, n in conn.execute(
            select(d.c.kind, func.count())
            .where(d.c.source == source, d.c.status == DiscrepancyStatus.OPEN)
            .group_by(d.c.kind)
        )
    }
