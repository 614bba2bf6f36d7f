"""``hookledger schedule``: the nightly reconciliation (APScheduler 3, cron from config) and a queue
snapshot every ``snapshot_interval_seconds``.

Run it once per deployment. Two schedulers against one database are still safe: each run takes the
source's lease in the database, and the second logs and records a ``skipped`` run.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.base import BaseScheduler
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy import Connection, Engine, func, insert, select, update

from reconciler.config import Settings
from reconciler.cron import last_fire_time, prune_trigger_for, trigger_for
from reconciler.inbox.metrics import oldest_unprocessed
from reconciler.issues.refresh import refresh
from reconciler.notify.dispatch import dispatch
from reconciler.ops.rollup import record_snapshot_hourly, roll_up
from reconciler.reconcile.run import Reconciler, RunSummary
from reconciler.reconcile.sweep import nightly_names, reconcile_sources
from reconciler.states import OUTBOX_UNSENT
from reconciler.storage.models import OUTBOX_SNAPSHOTS, QUEUE_SNAPSHOTS, SCHEDULER_HEARTBEATS
from reconciler.storage.queries import outbox_by_target
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)
NOTIFY_INTERVAL_SECONDS = 60  # dead letters and missed slots are looked for this often
ISSUES_INTERVAL_SECONDS = 60  # failures are grouped into issues this often


def snapshot(engine: Engine, settings: Settings) -> int:
    """Record each source's unprocessed count and oldest-unprocessed age (one aggregate query)."""
    now = utcnow()
    by_source = {s: (n, oldest) for s, n, oldest in oldest_unprocessed(engine)}
    names = sorted({s.name for s in settings.sources} | set(by_source))
    rows = []
    for name in names:
        count, oldest = by_source.get(name, (0, None))
        rows.append(
            {
                "at": now,
                "source": name,
                "unprocessed": count,
                "oldest_age_seconds": (now - oldest).total_seconds() if oldest else 0.0,
            }
        )
    with engine.begin() as conn:
        if rows:
            conn.execute(insert(QUEUE_SNAPSHOTS), rows)
            record_snapshot_hourly(conn, rows)
        outbox_rows = _outbox_snapshot(conn, settings, now)
        if outbox_rows:
            conn.execute(insert(OUTBOX_SNAPSHOTS), outbox_rows)
    # the dashboard's hourly counts follow the snapshots (incremental: a closed hour at a time)
    roll_up(engine, now)
    return len(rows)


def _outbox_snapshot(conn: Connection, settings: Settings, now: datetime) -> list[dict[str, Any]]:
    """Each outbox target's unsent count and oldest unsent age (configured targets, and any other
    that has unsent messages)."""
    by_target = outbox_by_target(conn)
    names = {t.name for t in settings.outbox.targets} | {
        name for name, (_, oldest) in by_target.items() if oldest is not None
    }
    rows = []
    for name in sorted(names):
        counts, oldest = by_target.get(name, ({}, None))
        rows.append(
            {
                "at": now,
                "target": name,
                "unsent": sum(counts.get(s.value, 0) for s in OUTBOX_UNSENT),
                "oldest_age_seconds": (now - oldest).total_seconds() if oldest else 0.0,
            }
        )
    return rows


def prune_now(engine: Engine, settings: Settings) -> None:
    """The scheduler's nightly prune: what ``hookledger prune`` deletes by ``[retention]
    keep_days`` (audited as the scheduler), never a failure of the scheduler itself."""
    from reconciler.ops.prune import prune

    try:
        result = prune(
            engine,
            settings,
            keep=timedelta(days=settings.retention.keep_days),
            now=utcnow(),
            actor="scheduler",
        )
    except Exception:  # the next night tries again; the scheduler keeps running
        log.exception("the scheduled prune failed")
        return
    log.info(
        "pruned rows older than %s: %d events, %d deliveries, %d outbox messages",
        result.cutoff.isoformat(),
        result.events,
        result.deliveries,
        result.outbox_messages,
    )


def heartbeat_age(engine: Engine, host: str | None = None) -> float | None:
    """Seconds since the newest heartbeat (of a scheduler on ``host``; any host when None), or
    None when there is none: what a container's health check asks."""
    stmt = select(func.max(SCHEDULER_HEARTBEATS.c.beat_at))
    if host is not None:
        stmt = stmt.where(SCHEDULER_HEARTBEATS.c.owner.like(f"{host}:%"))
    with engine.connect() as conn:
        newest = conn.execute(stmt).scalar_one()
    if newest is None:
        return None
    at: datetime = newest if newest.tzinfo else newest.replace(tzinfo=UTC)
    return float((utcnow() - at).total_seconds())


def heartbeat(engine: Engine, owner: str, started_at: datetime) -> None:
    """Say this scheduler is alive (one row per running scheduler, its time moved forward)."""
    now = utcnow()
    with engine.begin() as conn:
        moved = conn.execute(
            update(SCHEDULER_HEARTBEATS)
            .where(SCHEDULER_HEARTBEATS.c.owner == owner)
            .values(beat_at=now)
        ).rowcount
        if not moved:
            conn.execute(
                insert(SCHEDULER_HEARTBEATS).values(owner=owner, started_at=started_at, beat_at=now)
            )


def reconcile_all(
    reconciler: Reconciler, settings: Settings, trigger: str = "schedule", *, slotted: bool = False
) -> list[RunSummary]:
    """Every reconcilable source, then every outbox target, one after another; one failing does
    not stop the others. ``slotted``: called by the cron trigger, so a source whose run of the
    current slot already succeeded (another scheduler's) is skipped."""
    names = nightly_names(reconciler.engine, settings)
    slot = current_slot(settings, reconciler.clock()) if slotted else None
    outcomes = reconcile_sources(reconciler, names, trigger=trigger, slot=slot)
    summaries = [o.summary for o in outcomes if o.summary is not None]
    for summary in summaries:  # (a failure was logged where it happened)
        log.info(
            "reconciliation of %s %s: %d records, found %s, resolved %d, open %s",
            summary.source,
            summary.status,
            summary.records_scanned,
            _counts(summary.found),
            summary.resolved,
            _counts(summary.open_after),
            extra={"source": summary.source, "run_id": summary.run_id, "status": summary.status},
        )
    refresh_issues(reconciler.engine, settings)  # a failed run is an issue at once
    if settings.notify:  # told at once, not at the next minute's pass; never fails the runs
        dispatch(reconciler.engine, settings, scheduled=names)
    return summaries


def refresh_issues(engine: Engine, settings: Settings) -> None:
    """Group what failed since the last pass into issues, resolve the quiet ones; never raises:
    issues are a view of failures, and bringing them up to date must not fail a run."""
    try:
        report = refresh(engine, utcnow(), auto_resolve_after=settings.issues.auto_resolve_delta)
    except Exception as exc:  # (the database is down: the next pass catches up from the mark)
        log.warning("issues not brought up to date this time: %s: %s", type(exc).__name__, exc)
        return
    if report.opened or report.reopened or report.resolved:
        log.info(
            "issues: %d new, %d reopened, %d resolved (quiet)",
            len(report.opened),
            len(report.reopened),
            len(report.resolved),
        )


def notify(engine: Engine, settings: Settings) -> None:
    """The scheduler's pass over the notification targets: dead letters, missed slots, runs
    started elsewhere (CLI, dashboard) and retries."""
    dispatch(engine, settings, scheduled=lambda: nightly_names(engine, settings))


def current_slot(settings: Settings, now: datetime) -> datetime | None:
    """The newest time the schedule fired at or before ``now``, within the misfire grace (None:
    none in it)."""
    grace = timedelta(seconds=settings.reconcile.misfire_grace_seconds)
    return last_fire_time(trigger_for(settings), now, grace)


def _counts(by_kind: dict[str, int]) -> str:
    """``missing 3, diverged 1`` (``none``)."""
    return ", ".join(f"{kind} {n}" for kind, n in sorted(by_kind.items()) if n) or "none"


def build_scheduler(
    engine: Engine,
    settings: Settings,
    reconciler: Reconciler,
    *,
    run_now: bool = False,
    scheduler: BaseScheduler | None = None,
) -> BaseScheduler:
    cron = trigger_for(settings)
    sched = scheduler or BlockingScheduler(timezone=cron.timezone)
    sched.add_job(
        reconcile_all,
        cron,
        args=[reconciler, settings],
        kwargs={"slotted": True},
        id="reconcile",
        name="reconcile every source",
        coalesce=True,
        max_instances=1,
        misfire_grace_time=settings.reconcile.misfire_grace_seconds,
    )
    if run_now:  # once at start, whatever the slot
        sched.add_job(
            reconcile_all,
            DateTrigger(datetime.now(cron.timezone)),
            args=[reconciler, settings],
            id="reconcile-now",
            name="reconcile every source now",
        )
    sched.add_job(
        snapshot,
        IntervalTrigger(seconds=settings.reconcile.snapshot_interval_seconds),
        args=[engine, settings],
        id="snapshot",
        name="queue snapshot",
        coalesce=True,
        max_instances=1,
        next_run_time=datetime.now(cron.timezone),
    )
    if settings.notify:
        sched.add_job(
            notify,
            IntervalTrigger(seconds=NOTIFY_INTERVAL_SECONDS),
            args=[engine, settings],
            id="notify",
            name="notifications",
            coalesce=True,
            max_instances=1,
        )
    sched.add_job(
        refresh_issues,
        IntervalTrigger(seconds=ISSUES_INTERVAL_SECONDS),
        args=[engine, settings],
        id="issues",
        name="failures grouped into issues",
        coalesce=True,
        max_instances=1,
    )
    pruning = prune_trigger_for(settings)
    if pruning is not None:
        sched.add_job(
            prune_now,
            pruning,
            args=[engine, settings],
            id="prune",
            name="prune by [retention] keep_days",
            coalesce=True,
            max_instances=1,
            misfire_grace_time=settings.reconcile.misfire_grace_seconds,
        )
    owner = f"{socket.gethostname()}:{os.getpid()}"[:128]
    sched.add_job(
        heartbeat,
        IntervalTrigger(seconds=min(60, settings.reconcile.snapshot_interval_seconds)),
        args=[engine, owner, utcnow()],
        id="heartbeat",
        name="scheduler heartbeat",
        coalesce=True,
        max_instances=1,
        next_run_time=datetime.now(cron.timezone),
    )
    return sched
