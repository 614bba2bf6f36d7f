"""The nightly reconciliation's schedule as an APScheduler trigger (``[reconcile] schedule`` and
``timezone``), for the scheduler and for the dashboard's "next run"."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger

from reconciler.config import Settings
from reconciler.errors import ConfigError


def trigger_for(settings: Settings) -> CronTrigger:
    cfg = settings.reconcile
    try:
        tz = ZoneInfo(cfg.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"[reconcile] timezone: unknown time zone '{cfg.timezone}'") from None
    try:
        return CronTrigger.from_crontab(cfg.schedule, timezone=tz)
    except ValueError as exc:
        raise ConfigError(
            f"[reconcile] schedule: '{cfg.schedule}' is not a valid cron expression ({exc})"
        ) from None
