"""Which correlation id an incoming event carries (pure)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from connectors.parsing import ParsedEvent
from connectors.providers.stripe.signature import parse_stripe
from reconciler.correlation import correlation_id

EVENT = ParsedEvent("evt_1")
MINTED = re.compile(r"[0-9a-f]{32}")


def test_headers_first_then_the_providers_request_id_then_minted() -> None:
    both = {"x-correlation-id": "corr-1", "x-request-id": "req-proxy"}
    assert correlation_id(both, EVENT) == "corr-1"
    assert correlation_id({"x-request-id": "req-proxy"}, EVENT) == "req-proxy"
    stripe = ParsedEvent("evt_1", request_id="req_abc")
    assert correlation_id({}, stripe) == "req_abc"
    assert MINTED.fullmatch(correlation_id({}, EVENT))
    # a configured header replaces the default look-ups (the provider's id still follows)
    assert correlation_id({**both, "x-trace": "t-9"}, EVENT, "X-Trace") == "t-9"
    assert correlation_id(both, stripe, "X-Trace") == "req_abc"


def test_stripe_payloads_carry_their_request_id_old_and_new_style() -> None:
    new = b'{"id": "evt_1", "request": {"id": "req_new", "idempotency_key": "k"}}'
    old = b'{"id": "evt_1", "request": "req_old"}'
    none = b'{"id": "evt_1", "request": {"id": null}}'
    assert [parse_stripe({}, b).request_id for b in (new, old, none)] == [
        "req_new",
        "req_old",
        None,
    ]


@given(st.text(max_size=200))
def test_any_header_value_gives_a_storable_id(value: str) -> None:
    got = correlation_id({"x-correlation-id": value}, EVENT)
    assert 1 <= len(got) <= 64 and got.isascii() and got.isprintable() and " " not in got
    if got != value.strip():
        assert MINTED.fullmatch(got)
