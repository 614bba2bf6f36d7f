"""A standard five-field crontab expression as an APScheduler 3 trigger.

APScheduler 3 numbers the days of the week from Monday (0) where cron numbers them from Sunday (0
and 7), and its ``from_crontab`` passes the numbers through: ``0 2 * * 1`` would run on Tuesdays.
Numeric days are translated to names, which both read alike."""

from __future__ import annotations

import re
from datetime import tzinfo

from apscheduler.triggers.cron import CronTrigger

CRON_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def crontab_trigger(expression: str, timezone: tzinfo) -> CronTrigger:
    """Raises ValueError naming what is wrong (as ``from_crontab`` does)."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"wrong number of fields; got {len(fields)}, expected 5")
    minute, hour, day, month, weekdays = fields
    return CronTrigger(
        minute=minute,
        hour=hour,
        day=day,
        month=month,
        day_of_week=cron_weekdays(weekdays),
        timezone=timezone,
    )


def cron_weekdays(field: str) -> str:
    """Cron's day-of-week field with APScheduler's meaning: ``1-5`` → ``mon,tue,wed,thu,fri``,
    ``0,7`` → ``sun``, ``*/2`` → ``sun,tue,thu,sat``; ``*`` and names are left as they are."""
    if field == "*" or re.search(r"[A-Za-z]", field):
        return field
    days: set[int] = set()
    for part in field.split(","):
        span, _, step_text = part.partition("/")
        if span == "*":
            low, high = 0, 6
        elif "-" in span:
            low_text, _, high_text = span.partition("-")
            low, high = _day(low_text, part), _day(high_text, part)
        else:
            low = high = _day(span, part)
            if step_text:  # "1/2": from 1 to the end of the week, as cron reads it
                high = 6
        step = _number(step_text, part) if step_text else 1
        if low > high or step < 1:
            raise ValueError(f"day of week '{part}' is not a valid range")
        days.update(day % 7 for day in range(low, high + 1, step))
    return ",".join(CRON_DAYS[day] for day in sorted(days))


def _day(text: str, part: str) -> int:
    day = _number(text, part)
    if not 0 <= day <= 7:
        raise ValueError(f"day of week '{part}': {day} is not 0-7")
    return day


def _number(text: str, part: str) -> int:
    if not text.isdigit():
        raise ValueError(f"day of week '{part}' is not a number, a range or a name")
    return int(text)
