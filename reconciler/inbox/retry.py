"""Retry policy, pure: how a failure is classified and when the next attempt is due.

Transient: connection errors, timeouts, HTTP 408, 429 and 5xx, :class:`TransientError`, database
operational errors (locks, lost connections). Permanent: other 4xx (and 3xx: redirects are not
followed), :class:`PermanentError`, and data errors in a handler (``ValueError``, ``KeyError``,
``TypeError``, integrity violations, values a column cannot hold) which the same input will raise again.
Backoff is exponential with full jitter: ``uniform(0, min(max, base * 2 ** (attempt - 1)))``.
"""

from __future__ import annotations

import random
from email.utils import parsedate_to_datetime

import httpx
from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from reconciler.errors import PermanentError, TransientError
from reconciler.storage.models import ErrorClass
from reconciler.storage.types import utcnow

PERMANENT_TYPES: tuple[type[BaseException], ...] = (
    PermanentError,
    ValueError,
    KeyError,
    TypeError,
    LookupError,
    IntegrityError,
    DataError,  # a value the column cannot hold: retrying cannot help
)
TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    TransientError,
    OperationalError,
    httpx.TransportError,
    TimeoutError,
    ConnectionError,
)


def classify_exception(exc: BaseException) -> ErrorClass:
    if isinstance(exc, TRANSIENT_TYPES):
        return ErrorClass.TRANSIENT
    if isinstance(exc, PERMANENT_TYPES):
        return ErrorClass.PERMANENT
    # Unknown failures (a bug fixed by the next deploy, a dependency down) are retried, bounded by
    # max_attempts, rather than dead-lettered on the first try.
    return ErrorClass.TRANSIENT


def classify_status(status_code: int) -> ErrorClass | None:
    """None for success (2xx)."""
    if 200 <= status_code < 300:
        return None
    if status_code in (408, 429) or status_code >= 500:
        return ErrorClass.TRANSIENT
    return ErrorClass.PERMANENT


def backoff_delay(
    attempt: int, base: float, maximum: float, rng: random.Random | None = None
) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based), full jitter."""
    ceiling = min(maximum, base * (2 ** max(0, attempt - 1)))
    return (rng or random).uniform(0, ceiling)


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - utcnow()).total_seconds())
