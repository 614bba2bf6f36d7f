"""The schedule as cron reads it: the days of the week counted from Sunday, and the last slot
found on the nights the clocks change (APScheduler 3 loops for ever stepping a folded local time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from apscheduler.triggers.cron import CronTrigger

from reconciler.cron import last_fire_time
from reconciler.crontab import crontab_trigger


def test_the_last_slot_in_the_schedules_time_zone_across_a_dst_change() -> None:
    week = timedelta(days=8)
    berlin = CronTrigger.from_crontab("30 2 * * *", timezone=ZoneInfo("Europe/Berlin"))
    # 2026-10-25: Berlin's clocks go back from 03:00 CEST to 02:00 CET, so 02:30 comes twice
    slot = last_fire_time(berlin, datetime(2026, 10, 25, 12, 0, tzinfo=UTC), week)
    assert slot is not None and slot.isoformat() == "2026-10-25T02:30:00+01:00"
    first = last_fire_time(berlin, datetime(2026, 10, 25, 1, 0, tzinfo=UTC), week)
    assert first is not None and first.isoformat() == "2026-10-25T02:30:00+02:00"
    # 2026-03-29: 02:30 does not exist in Berlin; the last slot is the day before's
    spring = last_fire_time(berlin, datetime(2026, 3, 29, 12, 0, tzinfo=UTC), week)
    assert spring is not None and spring.astimezone(UTC) <= datetime(2026, 3, 29, 12, tzinfo=UTC)
    minutely = CronTrigger.from_crontab("*/5 * * * *", timezone=UTC)
    assert last_fire_time(minutely, datetime(2026, 12, 3, 9, 4, 59, tzinfo=UTC), week) == datetime(
        2026, 12, 3, 9, 0, tzinfo=UTC
    )
    weekly = crontab_trigger("0 4 * * 1", UTC)  # Mondays
    assert last_fire_time(weekly, datetime(2026, 12, 6, 0, 0, tzinfo=UTC), week) == datetime(
        2026, 11, 30, 4, 0, tzinfo=UTC
    )
    assert (
        last_fire_time(weekly, datetime(2026, 12, 6, 0, 0, tzinfo=UTC), timedelta(days=2)) is None
    )


def test_the_schedules_days_of_week_are_crons_not_apschedulers() -> None:
    from reconciler.crontab import cron_weekdays, crontab_trigger

    assert cron_weekdays("1") == "mon" and cron_weekdays("0") == cron_weekdays("7") == "sun"
    assert cron_weekdays("1-5") == "mon,tue,wed,thu,fri"
    assert cron_weekdays("5-7") == "sun,fri,sat"
    assert cron_weekdays("*/2") == "sun,tue,thu,sat"
    assert cron_weekdays("1/3") == "mon,thu"
    assert cron_weekdays("mon-fri") == "mon-fri" and cron_weekdays("*") == "*"
    monday_two = crontab_trigger("0 2 * * 1", UTC)
    fired = monday_two.get_next_fire_time(None, datetime(2026, 12, 3, tzinfo=UTC))  # a Thursday
    assert fired == datetime(2026, 12, 7, 2, 0, tzinfo=UTC) and fired.strftime("%A") == "Monday"
    for bad in ("8", "1-9", "5-2", "x", "1/0", "1-"):
        try:
            crontab_trigger(f"0 2 * * {bad}", UTC)
        except ValueError as exc:
            assert str(exc)
        else:
            raise AssertionError(bad)
