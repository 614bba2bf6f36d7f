"""Column types shared by every model: one policy for time (timezone-aware UTC everywhere)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every dialect.

    PostgreSQL stores ``timestamptz``; SQLite stores naive ISO text, so values are normalised to UTC
    on the way in and marked UTC on the way out. Naive datetimes are refused: they are a bug.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r} given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        parsed: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
        if parsed.tzinfo is None:
            return parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)


def as_utc(value: Any) -> datetime | None:
    """A datetime from a query result as aware UTC: aggregates (MIN/MAX) on SQLite lose the column
    type and return the stored naive text."""
    if value is None:
        return None
    parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    if not isinstance(parsed, datetime):
        raise TypeError(f"not a datetime: {value!r}")
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _wall_clock() -> datetime:
    return datetime.now(UTC)


_clock: Callable[[], datetime] = _wall_clock


def utcnow() -> datetime:
    """Now, as every stored time is taken: the wall clock, or the clock ``clock_override`` set."""
    return _clock()


@contextmanager
def clock_override(clock: Callable[[], datetime]) -> Iterator[None]:
    """Take every stored time from ``clock`` in this process for the block (the demo lays a day of
    traffic out in a minute through the real receiver, worker and publisher this way)."""
    global _clock
    previous, _clock = _clock, clock
    try:
        yield
    finally:
        _clock = previous
