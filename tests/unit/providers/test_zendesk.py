"""Zendesk's webhook signature and events, pure: the vector made with the documented formula and
Zendesk's static test secret (no official library verifies), refusals, the samples, a trigger
webhook's own body stored on a hash."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.providers.zendesk import PROVIDER, TEST_SECRET
from connectors.webhooks import Batch, ParsedEvent, SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/zendesk/signature_vector.json").read_text()
)
SECRET: str = VECTOR["secret"]
NOW: int = VECTOR["now"]
URL: str = VECTOR["url"]
BODY: bytes = VECTOR["body"].encode()
SIGNATURE = "x-zendesk-webhook-signature"
GARBAGE = ["ü" * 44, "not base64!", "", "sha256=abc", "\x00\x01"]


def options() -> SourceOptions:
    return SourceOptions(
        name="s",
        kind="zendesk",
        keys=PROVIDER.keys(),
        tolerance_seconds=PROVIDER.tolerance,
        credentials={},
    )


def verify(
    headers: dict[str, str],
    body: bytes = BODY,
    secrets: tuple[str, ...] = (SECRET,),
    now: float = NOW,
    url: str = URL,
) -> Verdict:
    return PROVIDER.verify(options(), WebhookRequest("POST", url, headers, body, now), secrets)


def event_of(verdict: Verdict) -> ParsedEvent:
    if isinstance(verdict, Batch):
        assert len(verdict.items) == 1
        return verdict.items[0].event
    assert isinstance(verdict, ParsedEvent)
    return verdict


def signed(
    body: bytes = BODY, secret: str = SECRET, now: float = NOW, url: str = URL
) -> dict[str, str]:
    assert PROVIDER.sign is not None
    base = {"content-type": "application/json"}
    return {**base, **PROVIDER.sign(options(), base, body, secret, now, url)}


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = event_of(verify(VECTOR["headers"]))
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]


def test_hookledger_signs_as_the_vector_does() -> None:
    event = event_of(verify(signed()))
    assert event.event_id == VECTOR["event_id"]


def test_a_wrong_secret_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], secrets=("not-the-secret",))


def test_a_body_changed_by_one_byte_is_refused() -> None:
    changed = bytearray(BODY)
    changed[len(changed) // 2] ^= 0x01
    with pytest.raises(SignatureError):
        verify(VECTOR["headers"], body=bytes(changed))


def test_a_missing_signature_is_refused() -> None:
    headers = {k: v for k, v in VECTOR["headers"].items() if k != SIGNATURE}
    with pytest.raises(SignatureError, match="missing"):
        verify(headers)


@pytest.mark.parametrize("garbage", GARBAGE)
def test_a_garbage_signature_is_a_401(garbage: str) -> None:
    with pytest.raises(SignatureError):
        verify({**VECTOR["headers"], SIGNATURE: garbage})


def test_rotation_the_second_secret_matches() -> None:
    event = event_of(verify(VECTOR["headers"], secrets=("an-old-secret", SECRET)))
    assert event.event_id == VECTOR["event_id"]


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_every_sample_signed_by_hookledger_verifies(event_type: str) -> None:
    assert PROVIDER.samples is not None
    now = time.time()
    sample = PROVIDER.samples.sample(options(), event_type, SECRET)
    assert PROVIDER.sign is not None
    headers = {**sample.headers}
    headers.update(PROVIDER.sign(options(), sample.headers, sample.body, SECRET, now, URL))
    event = event_of(verify(headers, body=sample.body, now=now))
    assert event.event_id == sample.event_id
    assert event.event_type == event_type
    again = PROVIDER.samples.sample(options(), event_type, SECRET)
    assert again.event_id != sample.event_id  # a fresh event each call


def test_a_stale_signature_is_refused() -> None:
    old = NOW - PROVIDER.tolerance - 60
    with pytest.raises(SignatureError, match="too old"):
        verify(signed(now=old))


def test_a_signature_from_the_future_is_refused() -> None:
    with pytest.raises(SignatureError, match="too new"):
        verify(signed(now=NOW + PROVIDER.tolerance + 60))


def test_within_the_window_is_accepted() -> None:
    event_of(verify(signed(now=NOW - PROVIDER.tolerance + 5)))


def _documented(timestamp: str, body: bytes, secret: str = TEST_SECRET) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def test_the_vector_is_the_documented_formula_with_the_test_secret() -> None:
    assert SECRET == TEST_SECRET
    stamp = VECTOR["headers"]["x-zendesk-webhook-signature-timestamp"]
    assert VECTOR["headers"][SIGNATURE] == _documented(stamp, BODY)
    assert signed()[SIGNATURE] == _documented(
        signed()["x-zendesk-webhook-signature-timestamp"], BODY
    )


def test_the_invocation_and_the_event_are_read() -> None:
    event = event_of(verify(VECTOR["headers"]))
    assert event.delivery_id == "8350205582"
    assert event.object_id == "35436"
    assert event.occurred_at is not None and event.occurred_at.year == 2025


def test_the_timestamp_must_be_iso_8601() -> None:
    headers = {**VECTOR["headers"], "x-zendesk-webhook-signature-timestamp": "1764547201"}
    headers[SIGNATURE] = _documented("1764547201", BODY)
    with pytest.raises(SignatureError, match="ISO 8601"):
        verify(headers)


def test_a_trigger_webhook_without_id_is_stored_on_a_hash() -> None:
    body = b'{"ticket_id":"35436","status":"open","updated":"2025-12-01T00:00:00Z"}'
    first = event_of(verify(signed(body=body), body=body))
    again = event_of(verify(signed(body=body, now=NOW + 30), body=body, now=NOW + 30))
    assert first.event_id.startswith("zendesk:") and first.event_id == again.event_id
    other = b'{"ticket_id":"35436","status":"solved","updated":"2025-12-01T00:01:00Z"}'
    assert event_of(verify(signed(body=other), body=other)).event_id != first.event_id


def test_resigning_keeps_the_webhook_headers() -> None:
    assert PROVIDER.sign is not None
    stored = {"content-type": "application/json", **VECTOR["headers"]}
    fresh = PROVIDER.sign(options(), stored, BODY, SECRET, NOW, URL)
    assert fresh["x-zendesk-webhook-invocation-id"] == "8350205582"
