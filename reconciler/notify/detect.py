"""What a target should hear about, read from the database (aggregates over indexed, recent rows
only): runs that found new discrepancies, scheduled runs that failed, dead letters that appeared
since the target was last told, a scheduled slot no scheduler ran, and new or reopened issues."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, select

from reconciler.config import NotifySettings, Settings
from reconciler.cron import last_fire_time, trigger_for
from reconciler.notify.notices import Fact
from reconciler.notify.store import last_fact_at
from reconciler.storage.models import (
    INBOX_EVENTS,
    ISSUES,
    PROCESSING_ATTEMPTS,
    RECON_RUNS,
    SCHEDULER_HEARTBEATS,
    EventStatus,
    IssueKind,
    IssueStatus,
    RunStatus,
)

# Nothing older is told, whatever the target's age: after a long outage the dashboard says more.
LOOKBACK = timedelta(hours=48)
ERROR_CHARS = 300
TYPES_SHOWN = 5
ISSUES_TOLD = 50  # issues told in one pass (the target's max_per_hour still applies)


def facts_for(
    conn: Connection,
    settings: Settings,
    target: NotifySettings,
    since: datetime,
    now: datetime,
    scheduled: Sequence[str],
) -> list[Fact]:
    """The facts for ``target`` after ``since`` (when it was first seen); ``scheduled``: the
    sources the schedule reconciles (a missed slot names them)."""
    floor = max(since, now - LOOKBACK)
    wanted: set[str] = set(target.on)
    only = set(target.sources)
    found: list[Fact] = []
    if wanted & {"discrepancies", "run_failed"}:
        found += _run_facts(conn, floor, wanted, only)
    if "dead_letters" in wanted:
        every = timedelta(minutes=target.dead_letters_every_minutes)
        found += _dead_letter_facts(conn, target.name, floor, now, every, only)
    if "issues" in wanted:
        # an issue of a kind the target is told about in its own notice is not told twice
        told = {IssueKind.DISCREPANCY} if "discrepancies" in wanted else set()
        told |= {IssueKind.RECONCILE_FAILURE} if "run_failed" in wanted else set()
        found += issue_facts(conn, floor, only, skip=told)
    if "run_missed" in wanted and scheduled:
        missed = missed_slot(conn, settings, floor, now, scheduled)
        if missed is not None:
            found.append(missed)
    return found


def _run_facts(conn: Connection, floor: datetime, wanted: set[str], only: set[str]) -> list[Fact]:
    r = RECON_RUNS
    stmt = select(
        r.c.run_id, r.c.source, r.c.trigger, r.c.status, r.c.finished_at, r.c.error, r.c.detail
    ).where(
        r.c.finished_at >= floor,
        r.c.status.in_([RunStatus.SUCCEEDED, RunStatus.FAILED]),
    )
    if only:
        stmt = stmt.where(r.c.source.in_(sorted(only)))
    out = []
    for run in conn.execute(stmt.order_by(r.c.finished_at)).mappings():
        detail = run["detail"] or {}
        finished: datetime = run["finished_at"]
        base = {
            "source": run["source"],
            "run_id": run["run_id"],
            "trigger": run["trigger"],
            "finished_at": finished.isoformat(timespec="seconds"),
        }
        if detail.get("quiet"):
            continue  # reconcile --no-notify
        if run["status"] == RunStatus.SUCCEEDED and "discrepancies" in wanted:
            if int(detail.get("new") or 0) > 0:
                data = {
                    **base,
                    "new": detail.get("new_by_kind") or {"discrepancies": int(detail["new"])},
                    "money": detail.get("new_money") or [],
                    "open": detail.get("open") or {},
                }
                out.append(
                    Fact(
                        "discrepancies",
                        f"discrepancies:{run['run_id']}",
                        run["source"],
                        finished,
                        data,
                    )
                )
        elif (
            run["status"] == RunStatus.FAILED
            and "run_failed" in wanted
            and run["trigger"] == "schedule"  # (a person who ran it by hand saw it fail)
        ):
            error = (run["error"] or "").strip().splitlines()
            data = {**base, "error": (error[0] if error else "")[:ERROR_CHARS]}
            out.append(
                Fact("run_failed", f"run_failed:{run['run_id']}", run["source"], finished, data)
            )
    return out


def _dead_letter_facts(
    conn: Connection,
    target: str,
    floor: datetime,
    now: datetime,
    every: timedelta,
    only: set[str],
) -> list[Fact]:
    """Per source, the events that became dead letters since the target was last told about that
    source's (one fact a source, keyed by the newest one: new dead letters make a new fact). A
    source the target was never told about also counts the dead letters from before the target
    was added that are still open (within :data:`LOOKBACK`): its first pass says what is open."""
    a, e = PROCESSING_ATTEMPTS, INBOX_EVENTS
    dead = a.c.outcome == EventStatus.DEAD
    oldest = now - LOOKBACK  # (floor is the later of this and when the target was added)
    stmt = select(a.c.source).where(dead, a.c.finished_at > oldest).group_by(a.c.source)
    if only:
        stmt = stmt.where(a.c.source.in_(sorted(only)))
    out = []
    for source in conn.execute(stmt).scalars().all():
        told = last_fact_at(conn, target, "dead_letters", source)
        if told is not None and now - told < every:
            continue  # told recently: the next message counts these too
        if told is not None:
            fresh: Any = a.c.finished_at > max(floor, told)
        else:  # never told: what came after it was added, and what is still open from before
            fresh = (a.c.finished_at > oldest) & (
                (a.c.finished_at > floor) | (e.c.status == EventStatus.DEAD)
            )
        window = (dead, a.c.source == source, fresh)
        new, until, first_in, last_in = conn.execute(
            select(
                func.count(),
                func.max(a.c.finished_at),
                func.min(e.c.received_at),
                func.max(e.c.received_at),
            )
            .select_from(a.join(e, e.c.id == a.c.inbox_event_id))
            .where(*window)
        ).one()
        if not new:
            continue
        types = conn.execute(
            select(e.c.event_type, func.count())
            .join(e, e.c.id == a.c.inbox_event_id)
            .where(*window)
            .group_by(e.c.event_type)
            .order_by(func.count().desc())
            .limit(TYPES_SHOWN)
        ).all()
        dead_now = conn.execute(
            select(func.count()).where(e.c.status == EventStatus.DEAD, e.c.source == source)
        ).scalar_one()
        data: dict[str, Any] = {
            "source": source,
            "new": int(new),
            "since": told.isoformat(timespec="seconds") if told else None,
            "until": until.isoformat(timespec="seconds"),
            "dead_now": int(dead_now),
            # when they were received: the Dead letters page's range, so the link shows these
            "received": [_second(first_in), _second(last_in + timedelta(seconds=1))],
            "types": {str(t or "unknown")[:64]: int(c) for t, c in types},
        }
        out.append(
            Fact("dead_letters", f"dead_letters:{source}:{until.isoformat()}", source, until, data)
        )
    return out


def _second(at: datetime) -> str:
    """UTC to the second, without a zone: the form the Dead letters page's ``from``/``to`` read."""
    at = at.astimezone(UTC) if at.tzinfo else at
    return at.replace(microsecond=0, tzinfo=None).isoformat()


def issue_facts(
    conn: Connection, floor: datetime, only: set[str], skip: set[IssueKind] | None = None
) -> list[Fact]:
    """Each open issue that failed after ``floor``, once per opening: the key names the issue
    and how often it was reopened, so a new issue is told once, and again each time it reopens
    (not for every failure it groups). Its signature is told, never an error's own text (the
    values stripped from it can be personal data)."""
    i = ISSUES.c
    stmt = select(ISSUES).where(i.status == IssueStatus.OPEN, i.last_seen >= floor)
    if only:
        stmt = stmt.where(i.source.in_(sorted(only)))
    if skip:
        stmt = stmt.where(i.kind.not_in(sorted(skip)))
    out = []
    for row in conn.execute(stmt.order_by(i.last_seen).limit(ISSUES_TOLD)).mappings():
        data = {
            "issue": int(row["id"]),
            "kind": str(row["kind"]),
            "source": row["source"],
            "type": row["event_type"],
            "signature": row["signature"],
            "count": int(row["count"]),
            "first_seen": row["first_seen"].isoformat(timespec="seconds"),
            "last_seen": row["last_seen"].isoformat(timespec="seconds"),
            "reopened": int(row["reopened_count"]),
        }
        key = f"issue:{row['id']}:{row['reopened_count']}"
        out.append(Fact("issue", key, row["source"][:128], row["last_seen"], data))
    return out


def missed_slot(
    conn: Connection,
    settings: Settings,
    floor: datetime,
    now: datetime,
    scheduled: Sequence[str],
) -> Fact | None:
    """The newest scheduled time past its misfire grace at which no scheduled run started, when
    a scheduler was already running then (a new install has missed nothing)."""
    cfg = settings.reconcile
    grace = timedelta(seconds=cfg.misfire_grace_seconds)
    cron = trigger_for(settings)
    slot = last_fire_time(cron, now - grace - timedelta(minutes=1), LOOKBACK)
    if slot is None or slot < floor:
        return None
    first_beat = conn.execute(select(func.min(SCHEDULER_HEARTBEATS.c.started_at))).scalar()
    if first_beat is None or first_beat > slot:
        return None
    ran = conn.execute(
        select(RECON_RUNS.c.run_id)
        .where(RECON_RUNS.c.trigger == "schedule", RECON_RUNS.c.started_at >= slot)
        .limit(1)
    ).first()
    if ran is not None:
        return None
    data = {
        "slot": slot.isoformat(timespec="seconds"),
        "schedule": cfg.schedule,
        "timezone": cfg.timezone,
        "grace_seconds": float(cfg.misfire_grace_seconds),
        "sources": list(scheduled),
    }
    return Fact("run_missed", f"run_missed:{slot.isoformat()}", "", slot, data)
