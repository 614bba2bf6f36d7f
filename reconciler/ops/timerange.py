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
