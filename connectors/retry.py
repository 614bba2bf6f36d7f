"""The one retry policy of hookledger, pure: when the next attempt is due and which HTTP answers
are worth another. The worker (``reconciler.inbox.retry``), the forwarder and the providers' HTTP
client (``connectors.http``) all use it.

Backoff is exponential with full jitter, ``uniform(0, min(maximum, base * 2 ** (attempt - 1)))``
(https://aws.amazon.com/builders-library/timeouts-retries-and-backoff-with-jitter/); a server's
``Retry-After`` (RFC 9110 section 10.2.3: delta-seconds or an HTTP date) takes precedence.
"""

from __future__ import annotations

import random
from email.utils import parsedate_to_datetime


def full_jitter(
    attempt: int, base: float, maximum: float, rng: random.Random | None = None
) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
    ceiling = min(maximum, base * (2 ** max(0, attempt - 1)))
    return (rng or random).uniform(0, ceiling)


def parse_retry_after(value: str | None, now: float) -> float | None:
    """``Retry-After`` as seconds from ``now`` (Unix time), never negative; None when absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError):
        return None


def transient_status(status_code: int) -> bool:
    """An HTTP answer another attempt may turn out differently: 408, 429 and 5xx. Other non-2xx
    answers (4xx, and 3xx since redirects are not followed) will be the same again."""
    return status_code in (408, 429) or status_code >= 500
