"""How long a refused request waits: the provider's own words, in each header family it uses."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import httpx

from connectors.http import retry_after_seconds

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC).timestamp()


def _answer(headers: dict[str, str]) -> httpx.Response:
    return httpx.Response(429, headers=headers)


def test_retry_after_in_seconds_or_as_a_date() -> None:
    assert retry_after_seconds(_answer({"Retry-After": "3"}), NOW) == 3.0
    later = format_datetime(datetime.fromtimestamp(NOW + 7, UTC), usegmt=True)
    assert retry_after_seconds(_answer({"Retry-After": later}), NOW) == 7.0


def test_the_ietf_ratelimit_headers_as_gocardless_sends_them() -> None:
    reset = format_datetime(datetime.fromtimestamp(NOW + 42, UTC), usegmt=True)
    spent = {"RateLimit-Limit": "1000", "RateLimit-Remaining": "0", "RateLimit-Reset": reset}
    assert retry_after_seconds(_answer(spent), NOW) == 42.0
    assert retry_after_seconds(_answer({**spent, "RateLimit-Reset": "5"}), NOW) == 5.0
    assert retry_after_seconds(_answer({**spent, "RateLimit-Remaining": "3"}), NOW) is None
    assert retry_after_seconds(_answer({**spent, "RateLimit-Reset": "soon"}), NOW) is None


def test_githubs_reset_is_a_unix_time() -> None:
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 10)}
    assert retry_after_seconds(_answer(headers), NOW) == 11.0
