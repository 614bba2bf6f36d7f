"""One pass over every ``[[notify]]`` target: record what it should hear about, then send what is
due, within its rate limit. Called after each reconciliation (scheduler and CLI), every minute by
the scheduler, and by ``hookledger notify``; it never raises, so a notification that cannot be sent
never fails the run that found it."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine

from connectors.retry import full_jitter
from reconciler.config import NotifySettings, Settings
from reconciler.issues.refresh import refresh
from reconciler.notify import store
from reconciler.notify.detect import facts_for
from reconciler.notify.notices import render
from reconciler.notify.send import Sender
from reconciler.states import NotificationStatus
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)

RATE_WINDOW = timedelta(hours=1)
RETRY_BASE_SECONDS, RETRY_MAX_SECONDS = 30.0, 3600.0


@dataclass
class TargetReport:
    recorded: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)  # sent, suppressed, failed, retrying
    errors: list[str] = field(default_factory=list)

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1


def dispatch(
    engine: Engine,
    settings: Settings,
    *,
    sender: Sender | None = None,
    scheduled: Sequence[str] | Callable[[], Sequence[str]] = (),
    clock: Callable[[], datetime] = utcnow,
    rng: random.Random | None = None,
) -> dict[str, TargetReport]:
    """Every target once; ``scheduled``: the sources the schedule reconciles (a missed slot names
    them; empty: missed slots are not looked for)."""
    reports: dict[str, TargetReport] = {}
    if not settings.notify:
        return reports
    try:
        names = list(scheduled() if callable(scheduled) else scheduled)
    except Exception as exc:  # (the database is down: each target will say so below)
        log.warning("notifications: the scheduled sources are unknown: %s", exc)
        names = []
    if any("issues" in target.on for target in settings.notify):
        try:  # told from what failed up to now, whoever runs the pass (scheduler, CLI, cron)
            refresh(engine, clock(), auto_resolve_after=settings.issues.auto_resolve_delta)
        except Exception as exc:  # (each target says below what it could not read)
            log.warning("notifications: issues not brought up to date: %s", exc)
    own = sender is None
    sender = sender or Sender()
    try:
        for target in settings.notify:
            report = reports[target.name] = TargetReport()
            try:
                _one(engine, settings, target, sender, names, clock, rng, report)
            except Exception as exc:  # never the caller's failure: logged, said in the report
                report.errors.append(f"{exc.__class__.__name__}: {exc}")
                log.warning(
                    "notify target '%s' skipped this time: %s: %s",
                    target.name,
                    exc.__class__.__name__,
                    exc,
                )
    finally:
        if own:
            sender.close()
    return reports


def _one(
    engine: Engine,
    settings: Settings,
    target: NotifySettings,
    sender: Sender,
    scheduled: Sequence[str],
    clock: Callable[[], datetime],
    rng: random.Random | None,
    report: TargetReport,
) -> None:
    now = clock()
    with engine.begin() as conn:  # found and recorded in one transaction
        since = store.target_since(conn, target.name, now)
        facts = facts_for(conn, settings, target, since, now, scheduled)
        report.recorded = store.record(conn, target.name, facts, now)
    lease = timedelta(seconds=2 * target.timeout_seconds + 30)
    with engine.begin() as conn:
        claimed = store.claim_due(conn, target.name, now, lease)
    base_url = settings.dashboard.base_url
    for row in claimed:
        now = clock()
        with engine.begin() as conn:
            over = store.sent_within(conn, target.name, now - RATE_WINDOW) >= target.max_per_hour
            if over:
                store.finish(conn, row["id"], NotificationStatus.SUPPRESSED, now)
            held = 0 if over else store.held_back(conn, target.name)
        if over:
            report.count("suppressed")
            log.warning(
                "notify target '%s': %s held back (max_per_hour %d reached)",
                target.name,
                row["key"],
                target.max_per_hour,
            )
            continue
        message = render(row["kind"], row["payload"], base_url, held)
        outcome = sender.send(target, row["key"], row["kind"], row["payload"], message, now)
        status, retry_at = NotificationStatus.SENT, None
        if not outcome.ok:
            if outcome.retry and row["attempts"] < target.max_attempts:
                status = NotificationStatus.PENDING
                delay = full_jitter(row["attempts"], RETRY_BASE_SECONDS, RETRY_MAX_SECONDS, rng)
                retry_at = now + timedelta(seconds=max(delay, 1.0))
            else:
                status = NotificationStatus.FAILED
        with engine.begin() as conn:
            store.finish(
                conn, row["id"], status, clock(), error=outcome.error or None, retry_at=retry_at
            )
        outcome_name = "retrying" if status is NotificationStatus.PENDING else status.value
        report.count(outcome_name)
        extra = {"target": target.name, "key": row["key"], "attempt": row["attempts"]}
        if outcome.ok:
            log.info("notified '%s': %s", target.name, message.title, extra=extra)
        else:
            report.errors.append(outcome.error)
            log.warning(
                "notify target '%s': %s not sent (attempt %d, %s): %s",
                target.name,
                row["key"],
                row["attempts"],
                "will retry" if retry_at else "given up",
                outcome.error,
                extra=extra,
            )
