"""Lemon Squeezy's ``X-Signature`` (hex HMAC-SHA256 of the body), pure: the vector, the documented
algorithm both ways (Lemon Squeezy has no Python library that verifies: its documentation is the
reference), the hashed identity, refusals, rotation, the samples."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.lemonsqueezy import PROVIDER
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (
        Path(__file__).parents[2] / "fixtures/providers/lemonsqueezy/signature_vector.json"
    ).read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
HEADER = "x-signature"
OPTIONS = SourceOptions(
    name="s", kind="lemonsqueezy", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


def documented_signature(secret: str, body: bytes) -> str:
    """The "Signing requests" page: an HMAC-SHA256 hex digest of the raw body with the secret."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> Verdict:
    return PROVIDER.verify(OPTIONS, WebhookRequest("POST", URL, headers, body, NOW), secrets)


def sign(body: bytes, headers: dict[str, str], secret: str = SECRET) -> dict[str, str]:
    assert PROVIDER.sign is not None
    return PROVIDER.sign(OPTIONS, headers, body, secret, NOW, URL)


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(VECTOR["headers"])
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert event.object_type == VECTOR["object_type"]
    assert event.object_id == VECTOR["object_id"]
    assert event.occurred_at is not None and event.occurred_at.year == 2021
    assert PROVIDER.sensitive_headers(OPTIONS) == frozenset({HEADER})


def test_the_documented_algorithm_and_ours_agree_both_ways() -> None:
    assert documented_signature(SECRET, BODY) == VECTOR["headers"][HEADER]
    body = (
        b'{"meta":{"event_name":"subscription_updated"},"data":{"type":"subscriptions","id":"7"}}'
    )
    documented = documented_signature(SECRET, body)
    assert isinstance(verify({HEADER: documented}, body), ParsedEvent)
    ours = sign(body, {"x-event-name": "subscription_updated"})
    assert ours[HEADER] == documented
    assert ours["x-event-name"] == "subscription_updated"  # carried when signed again


def test_the_identity_is_the_body_so_a_retry_is_a_duplicate() -> None:
    first = verify(VECTOR["headers"])
    again = verify(dict(VECTOR["headers"]))
    assert isinstance(first, ParsedEvent) and isinstance(again, ParsedEvent)
    assert first.event_id == again.event_id
    assert first.event_id == "lemonsqueezy:" + hashlib.sha256(BODY).hexdigest()
    other = BODY.replace(b'"order_created"', b'"order_refunded"')
    event = verify({HEADER: documented_signature(SECRET, other)}, other)
    assert isinstance(event, ParsedEvent) and event.event_id != first.event_id


def test_a_wrong_secret_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], secrets=("not_the_secret",))


def test_a_body_changed_by_one_byte_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], BODY.replace(b'"total":1199', b'"total":1198'))


def test_a_missing_signature_is_refused() -> None:
    with pytest.raises(SignatureError, match="missing"):
        verify({"x-event-name": "order_created"})


@pytest.mark.parametrize("value", ["é" * 64, "x" * 64, "sha256=" + "0" * 64, "0", "\ufeff"])
def test_a_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        verify({HEADER: value})


def test_rotation_the_second_secret_matches() -> None:
    event = verify(VECTOR["headers"], secrets=("old_secret", SECRET))
    assert isinstance(event, ParsedEvent) and event.event_id == VECTOR["event_id"]


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_every_sample_verifies_and_is_its_own_event(event_type: str) -> None:
    assert PROVIDER.samples is not None
    first = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    second = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert first.event_id != second.event_id
    assert first.headers["x-event-name"] == event_type
    event = verify({**first.headers, **sign(first.body, first.headers)}, first.body)
    assert isinstance(event, ParsedEvent)
    assert event.event_id == first.event_id
    assert event.event_type == event_type
    assert event.object_id is not None and event.occurred_at is not None
