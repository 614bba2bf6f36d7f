"""The demo's day: when each webhook "arrives" over the last 24 hours, the incident hour, and the
clock the demo steps through that day. Pure, except the clock reading the monotonic timer."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

T = TypeVar("T")

SLOT = timedelta(minutes=15)
INCIDENT_STARTS_AFTER = timedelta(hours=14)  # into the day, so the backlog has time to drain
INCIDENT_LASTS = timedelta(hours=1)


class SteppedClock:
    """Simulated time: it runs at wall-clock speed from the last ``jump`` and never goes back, so
    time inside a slot (handlers, retries seconds apart, leases) behaves as in production while
    the demo skips the quiet minutes between slots."""

    def __init__(self, start: datetime) -> None:
        self._lock = threading.Lock()
        self._base = start
        self._at = time.monotonic()

    def __call__(self) -> datetime:
        with self._lock:
            return self._base + timedelta(seconds=time.monotonic() - self._at)

    def jump(self, to: datetime) -> None:
        with self._lock:
            now = self._base + timedelta(seconds=time.monotonic() - self._at)
            if to > now:
                self._base, self._at = to, time.monotonic()


@dataclass(frozen=True)
class Day:
    start: datetime
    end: datetime  # the last delivery's slot ends here; the tail drains retries until ``until``
    until: datetime

    @property
    def incident(self) -> tuple[datetime, datetime]:
        begin = self.start + INCIDENT_STARTS_AFTER
        return begin, begin + INCIDENT_LASTS

    def in_incident(self, at: datetime) -> bool:
        begin, finish = self.incident
        return begin <= at < finish

    def slots(self) -> Iterator[datetime]:
        """Slot starts from the day's start up to ``until`` (deliveries stop at ``end``)."""
        at = self.start
        while at < self.until:
            yield at
            at += SLOT


def day_ending(now: datetime) -> Day:
    """Traffic from just inside the last 24 hours up to 45 minutes ago (so "Last 24 hours" shows
    all of it); the last 45 minutes drain what the incident and the planned faults left to retry,
    so the day ends with a quiet queue."""
    return Day(
        start=now - timedelta(hours=23, minutes=55),
        end=now - timedelta(minutes=45),
        until=now - timedelta(minutes=5),
    )


def _busy_hours(u: float) -> float:
    """Maps an even spread over [0, 1) onto a day with a busier middle (monotone: order kept)."""
    return u + 0.07 * math.sin(2 * math.pi * u)


def arrival_times(streams: Mapping[str, Sequence[T]], day: Day) -> list[tuple[datetime, str, T]]:
    """Each stream's items, in their order, spread over the day's delivery span; all streams merged
    in time order. The order inside a stream is what its sender planned (reordered, late), kept."""
    span = (day.end - day.start).total_seconds()
    out: list[tuple[datetime, str, T]] = []
    for name, items in streams.items():
        n = len(items)
        for i, item in enumerate(items):
            u = _busy_hours((i + 0.5) / n)
            out.append((day.start + timedelta(seconds=span * u), name, item))
    out.sort(key=lambda entry: entry[0])
    return out
