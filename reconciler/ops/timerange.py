"""Time ranges and buckets for charts: pure functions, no I/O."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

PRESETS: dict[str, timedelta] = {
    "Last 15 minutes": timedelta(minutes=15),
    "Last hour": timedelta(hours=1),
    "Last 24 hours": timedelta(hours=24),
    "Last 7 days": timedelta(days=7),
    "Last 30 days": timedelta(days=30),
}
# Bucket widths a chart may use, smallest first (seconds).
BUCKET_LADDER = (60, 300, 900, 3600, 3 * 3600, 6 * 3600, 86400, 7 * 86400)
MAX_BUCKETS = 200


@dataclass(frozen=True)
class TimeRange:
    start: datetime  # inclusive, UTC
    end: datetime  # exclusive, UTC

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("a time range needs timezone-aware datetimes")
        if self.end <= self.start:
            raise ValueError(f"the range ends ({self.end}) before it starts ({self.start})")

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    @classmethod
    def last(cls, span: timedelta, now: datetime) -> TimeRange:
        return cls(now - span, now)


RELATIVE_UNITS = {"m": 60, "h": 3600, "d": 86400}
MAX_RELATIVE = timedelta(days=400)


def parse_relative(text: str) -> timedelta:
    """A range relative to now as Grafana writes it in a URL: ``now-1h``, ``now-90m``, ``now-7d``
    (``1h`` alone too); a ValueError for anything else, or beyond 400 days."""
    value = text.strip().removeprefix("now-")
    number, unit = value[:-1], value[-1:]
    if unit not in RELATIVE_UNITS or not number.isdigit() or len(number) > 6:
        raise ValueError(f"not a relative range like now-1h: {text!r}")
    span = timedelta(seconds=int(number) * RELATIVE_UNITS[unit])
    if not timedelta(0) < span <= MAX_RELATIVE:
        raise ValueError(f"a relative range between 1 minute and 400 days: {text!r}")
    return span


def describe_span(span: timedelta) -> str:
    """``timedelta(hours=1)`` → ``Last 1 hour``; the presets' own names where one matches."""
    for name, preset_span in PRESETS.items():
        if preset_span == span:
            return name
    seconds = int(span.total_seconds())
    for size, noun in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds % size == 0:
            n = seconds // size
            return f"Last {n} {noun}{'' if n == 1 else 's'}"
    raise ValueError(span)  # (parse_relative gives whole minutes)


def relative_code(span: timedelta) -> str:
    """The URL's form of a span: ``now-1h``, ``now-90m``."""
    seconds = int(span.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"now-{seconds // size}{unit}"
    raise ValueError(span)


def preset(name: str, now: datetime) -> TimeRange:
    try:
        return TimeRange.last(PRESETS[name], now)
    except KeyError:
        raise ValueError(f"unknown range '{name}': one of {', '.join(PRESETS)}") from None


def choose_bucket(rng: TimeRange) -> int:
    """The smallest bucket width (seconds) that draws the range in at most ``MAX_BUCKETS`` bars."""
    for width in BUCKET_LADDER:
        if rng.seconds / width <= MAX_BUCKETS:
            return width
    return BUCKET_LADDER[-1]


def bucket_start(index: int, width: int) -> datetime:
    """The UTC start of bucket ``index`` (buckets are aligned to the Unix epoch)."""
    return datetime.fromtimestamp(index * width, UTC)


def bucket_index(at: datetime, width: int) -> int:
    return int(at.timestamp()) // width


def bucket_indexes(rng: TimeRange, width: int) -> Iterator[int]:
    """Every bucket the range touches, so a chart can show empty buckets as zero."""
    first = bucket_index(rng.start, width)
    last = bucket_index(rng.end - timedelta(microseconds=1), width)
    return iter(range(first, last + 1))


def describe_width(width: int) -> str:
    if width % 86400 == 0:
        return f"{width // 86400} d"
    if width % 3600 == 0:
        return f"{width // 3600} h"
    if width % 60 == 0:
        return f"{width // 60} min"
    return f"{width} s"
