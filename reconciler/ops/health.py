"""The health strip at the top of Overview: what an on-call engineer checks first, each judged
green / amber / red. ``health_facts`` reads (a handful of aggregate queries, each on an index);
``judge`` is pure."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from sqlalchemy import Connection, func, select

from reconciler.ops.display import age
from reconciler.ops.links import PageLink, to
from reconciler.ops.overview import UNPROCESSED, queue_now
from reconciler.ops.silences import Silenced, active
from reconciler.storage.models import (
    DELIVERIES,
    INBOX_EVENTS,
    RECON_RUNS,
    SCHEDULER_HEARTBEATS,
    RunStatus,
)
from reconciler.storage.sql import pin_index
from reconciler.storage.types import as_utc

# a nightly run that is a couple of hours late is worth a look; a missed night is an incident
RUN_AMBER_AFTER = timedelta(hours=25)
RUN_RED_AFTER = timedelta(hours=26)
QUIET_DELIVERIES_AFTER = timedelta(hours=6)


class Level(enum.StrEnum):
    OK = "ok"
    WARN = "warn"
    BAD = "bad"


@dataclass(frozen=True)
class Signal:
    label: str
    value: str
    level: Level
    detail: str
    link: PageLink | None = None  # the page that shows what the figure counts
    silenced: str | None = None  # who silenced this warning, until when and why


@dataclass(frozen=True)
class LastRun:
    """A reconciled source's newest finished run."""

    status: str
    finished_at: datetime
    error: str | None  # its first line, for a failed run


@dataclass(frozen=True)
class HealthFacts:
    now: datetime
    dead: int
    stuck: int  # unprocessed events due (received, replayed) before now - stuck_after_seconds
    oldest_unprocessed_age: float | None
    last_success: dict[str, datetime | None]  # per reconciled source
    heartbeat: datetime | None  # the newest scheduler heartbeat
    last_delivery: datetime | None
    last_run: dict[str, LastRun] = field(default_factory=dict)  # per reconciled source
    silenced: dict[str, Silenced] = field(default_factory=dict)  # by signal label


def first_line(text: str | None, limit: int = 160) -> str:
    """An error's first non-empty line, cut to ``limit`` characters (the full text is on the run)."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def last_runs(conn: Connection, sources: Sequence[str]) -> dict[str, LastRun]:
    """Each source's newest finished run (one indexed lookup per source: a handful of sources)."""
    r = RECON_RUNS
    out: dict[str, LastRun] = {}
    for source in sources:
        row = conn.execute(
            select(r.c.status, r.c.finished_at, r.c.error)
            .where(r.c.source == source, r.c.finished_at.is_not(None))
            .order_by(r.c.started_at.desc(), r.c.id.desc())
            .limit(1)
        ).first()
        at = as_utc(row.finished_at) if row is not None else None
        if row is not None and at is not None:
            failed = str(row.status) == RunStatus.FAILED
            out[source] = LastRun(str(row.status), at, first_line(row.error) if failed else None)
    return out


def health_facts(
    conn: Connection,
    now: datetime,
    sources: Sequence[str],
    stuck_after_seconds: float,
    reconciled: Sequence[str] | None = None,
) -> HealthFacts:
    """``reconciled``: the sources whose provider API can be read (default: ``sources``); the
    others are receive-only and have no reconciliation to judge."""
    reconciled = list(sources if reconciled is None else reconciled)
    e = INBOX_EVENTS
    queue = queue_now(conn, sources)
    stuck_stmt = select(func.count()).where(
        e.c.status.in_(UNPROCESSED),
        e.c.queued_at < now - timedelta(seconds=stuck_after_seconds),
    )
    if sources:
        stuck_stmt = stuck_stmt.where(e.c.source.in_(sources))
    stuck_stmt = pin_index(stuck_stmt, e, "ix_inbox_events_status_next_attempt_at", conn.dialect)
    runs = select(RECON_RUNS.c.source, func.max(RECON_RUNS.c.finished_at)).where(
        RECON_RUNS.c.status == RunStatus.SUCCEEDED
    )
    if reconciled:
        runs = runs.where(RECON_RUNS.c.source.in_(reconciled))
    last = {str(s): as_utc(at) for s, at in conn.execute(runs.group_by(RECON_RUNS.c.source))}
    delivered = select(func.max(DELIVERIES.c.received_at))
    if sources:
        delivered = delivered.where(DELIVERIES.c.source.in_(sources))
    ages = [q.oldest_age_seconds(now) for q in queue]
    known = [a for a in ages if a is not None]
    return HealthFacts(
        now=now,
        dead=sum(q.dead for q in queue),
        stuck=int(conn.execute(stuck_stmt).scalar_one()),
        oldest_unprocessed_age=max(known) if known else None,
        last_success={s: last.get(s) for s in reconciled} if reconciled else dict(last),
        last_run=last_runs(conn, reconciled or list(last)),
        heartbeat=as_utc(conn.execute(select(func.max(SCHEDULER_HEARTBEATS.c.beat_at))).scalar()),
        last_delivery=as_utc(conn.execute(delivered).scalar()),
        silenced=active(conn, now),
    )


def judge(
    facts: HealthFacts, stuck_after_seconds: float, heartbeat_every_seconds: float
) -> list[Signal]:
    """The strip's signals, in reading order; a warning an operator silenced says so (a red one
    is never silenced)."""
    return [
        replace(s, silenced=facts.silenced[s.label].describe())
        if s.level is Level.WARN and s.label in facts.silenced
        else s
        for s in _signals(facts, stuck_after_seconds, heartbeat_every_seconds)
    ]


def _signals(
    facts: HealthFacts, stuck_after_seconds: float, heartbeat_every_seconds: float
) -> list[Signal]:
    now = facts.now
    out = [
        Signal(
            "Dead events",
            f"{facts.dead:,}",
            Level.BAD if facts.dead else Level.OK,
            "dead letters wait for a person" if facts.dead else "no dead letters",
            to("dead_letters"),
        ),
        Signal(
            "Stuck events",
            f"{facts.stuck:,}",
            Level.BAD if facts.stuck else Level.OK,
            f"unprocessed for more than {age(stuck_after_seconds)}",
            to("events", status=["pending", "processing", "failed"]),
        ),
    ]
    oldest = facts.oldest_unprocessed_age
    if oldest is None:
        out.append(Signal("Oldest unprocessed", "none", Level.OK, "the queue is empty"))
    else:
        level = (
            Level.BAD
            if oldest > stuck_after_seconds
            else Level.WARN
            if oldest > stuck_after_seconds / 2
            else Level.OK
        )
        out.append(
            Signal(
                "Oldest unprocessed",
                age(oldest),
                level,
                f"stuck after {age(stuck_after_seconds)}",
                to("events", status=["pending", "processing", "failed"]),
            )
        )
    for source, at in sorted(facts.last_success.items()):
        run = facts.last_run.get(source)
        if run is not None and run.status == RunStatus.FAILED:
            out.append(
                Signal(
                    f"Reconciled: {source}",
                    f"failed {age((now - run.finished_at).total_seconds())} ago",
                    Level.BAD,
                    run.error or "the last run failed",
                    to("runs", source=source),
                )
            )
            continue
        if at is None:
            out.append(
                Signal(
                    f"Reconciled: {source}",
                    "never",
                    Level.WARN,
                    "no successful reconciliation yet",
                    to("runs", source=source),
                )
            )
            continue
        gap = now - at
        level = (
            Level.BAD if gap > RUN_RED_AFTER else Level.WARN if gap > RUN_AMBER_AFTER else Level.OK
        )
        out.append(
            Signal(
                f"Reconciled: {source}",
                f"{age(gap.total_seconds())} ago",
                level,
                f"last successful run {at:%Y-%m-%d %H:%M} UTC",
                to("runs", source=source),
            )
        )
    if facts.last_success:  # with nothing to reconcile, a scheduler would have nothing to run
        out.extend(_scheduler(facts, heartbeat_every_seconds))
    if facts.last_delivery is None:
        out.append(Signal("Last delivery", "none", Level.WARN, "no webhook received yet"))
    else:
        gap = now - facts.last_delivery
        out.append(
            Signal(
                "Last delivery",
                f"{age(gap.total_seconds())} ago",
                Level.WARN if gap > QUIET_DELIVERIES_AFTER else Level.OK,
                f"a quiet spell over {age(QUIET_DELIVERIES_AFTER.total_seconds())} is worth a "
                "look at the provider's endpoint settings",
            )
        )
    return out


def _scheduler(facts: HealthFacts, heartbeat_every_seconds: float) -> list[Signal]:
    if facts.heartbeat is None:
        return [Signal("Scheduler", "never seen", Level.WARN, "no `hookledger schedule` has run")]
    quiet = (facts.now - facts.heartbeat).total_seconds()
    level = (
        Level.OK
        if quiet <= 3 * heartbeat_every_seconds
        else Level.WARN
        if quiet <= 10 * heartbeat_every_seconds
        else Level.BAD
    )
    return [
        Signal("Scheduler", f"{age(quiet)} ago", level, "last heartbeat of `hookledger schedule`")
    ]
