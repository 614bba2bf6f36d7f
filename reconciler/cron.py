"""The nightly reconciliation's schedule as an APScheduler trigger (``[reconcile] schedule`` and
``timezone``), for the scheduler and for the dashboard's "next run"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger

from reconciler.config import Settings
from reconciler.crontab import crontab_trigger
from reconciler.errors import ConfigError


def trigger_for(settings: Settings) -> CronTrigger:
    cfg = settings.reconcile
    try:
        tz = ZoneInfo(cfg.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"[reconcile] timezone: unknown time zone '{cfg.timezone}'") from None
    try:
        return crontab_trigger(cfg.schedule, tz)
    except ValueError as exc:
        raise ConfigError(
            f"[reconcile] schedule: '{cfg.schedule}' is not a valid cron expression ({exc})"
        ) from None


def last_fire_time(cron: CronTrigger, before: datetime, horizon: timedelta) -> datetime | None:
    """The newest time ``cron`` fires at or before ``before``, no older than ``horizon``.

    Fire times are stepped through in UTC: stepping a local time by a second keeps its ``fold``,
    and on the night the clocks go back APScheduler 3 then returns the same time for ever."""
    limit = before.astimezone(UTC)
    start = limit - horizon
    # few steps for a frequent schedule: a window of an hour first, widened only when it is empty
    for window in (timedelta(hours=1), timedelta(days=1), horizon):
        fired: datetime | None = cron.get_next_fire_time(None, max(start, limit - window))
        last: datetime | None = None
        while fired is not None and fired.astimezone(UTC) <= limit:
            last = fired
            fired = cron.get_next_fire_time(None, fired.astimezone(UTC) + timedelta(seconds=1))
        if last is not None or window >= horizon:
            return last
    return None


def prune_trigger_for(settings: Settings) -> CronTrigger | None:
    """When the scheduler prunes ([prune] schedule in [reconcile] timezone); None: it does not."""
    expression = settings.prune.schedule.strip()
    if not expression:
        return None
    tz = trigger_for(settings).timezone  # (the time zone checked there)
    try:
        return crontab_trigger(expression, tz)
    except ValueError as exc:
        raise ConfigError(
            f"[prune] schedule: '{expression}' is not a valid cron expression ({exc})"
        ) from None
