"""Zoom webhooks (``kind = "zoom"``): ``x-zm-signature`` and the endpoint's URL validation. Zoom's
official library is JavaScript (``@zoom/rivet``), none on PyPI verifies webhooks: the vector was
checked with Rivet 0.4.0 (it accepts both requests and computes the same ``encryptedToken``)."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest

from connectors.options import SourceOptions
from connectors.providers.zoom import PROVIDER
from connectors.webhooks import BadPayload, Handshake, ParsedEvent, SignatureError, WebhookRequest

VECTOR: dict[str, Any] = json.loads(
    (
        Path(__file__).parents[2] / "fixtures" / "providers" / "zoom" / "signature_vector.json"
    ).read_text()
)
SECRET = VECTOR["secret"]
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
VALIDATION = VECTOR["url_validation"]


def options() -> SourceOptions:
    return SourceOptions(
        name="s", kind="zoom", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
    )


def request(
    headers: dict[str, str] | None = None, body: bytes | None = None, now: float = NOW
) -> WebhookRequest:
    return WebhookRequest(
        "POST",
        URL,
        VECTOR["headers"] if headers is None else headers,
        VECTOR["body"].encode() if body is None else body,
        now,
    )


def validation(headers: dict[str, str] | None = None, now: float | None = None) -> WebhookRequest:
    return WebhookRequest(
        "POST",
        URL,
        VALIDATION["headers"] if headers is None else headers,
        VALIDATION["body"].encode(),
        float(VALIDATION["now"]) if now is None else now,
    )


def test_vector_verifies_and_reads_identity() -> None:
    event = PROVIDER.verify(options(), request(), (SECRET,))
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_id == "zoom:" + hashlib.sha256(VECTOR["body"].encode()).hexdigest()
    assert event.event_type == VECTOR["event_type"]
    assert (event.object_type, event.object_id) == ("meeting", "1234567890")
    assert event.occurred_at is not None and int(event.occurred_at.timestamp()) == 1626230691


def test_rotation_second_secret_matches() -> None:
    assert isinstance(PROVIDER.verify(options(), request(), ("old-token", SECRET)), ParsedEvent)


def test_wrong_secret_refused() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(), ("old-token",))


def test_body_changed_by_one_byte_refused() -> None:
    body = VECTOR["body"].replace("My Meeting", "My Meetinh").encode()
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(body=body), (SECRET,))


@pytest.mark.parametrize("name", ["x-zm-signature", "x-zm-request-timestamp"])
def test_missing_header_refused(name: str) -> None:
    headers = {k: v for k, v in VECTOR["headers"].items() if k != name}
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(headers), (SECRET,))


@pytest.mark.parametrize("value", ["v0=zz", "v0=é€", "garbage", "v0=", "sha256=00"])
def test_garbage_signature_is_a_401(value: str) -> None:
    headers = {**VECTOR["headers"], "x-zm-signature": value}
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(headers), (SECRET,))


def test_stale_timestamp_refused() -> None:
    with pytest.raises(SignatureError, match="tolerance"):
        PROVIDER.verify(options(), request(now=NOW + PROVIDER.tolerance + 5), (SECRET,))


def test_sample_signed_verifies() -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    now = 1_800_000_000.0
    for event_type in PROVIDER.samples.types:
        sample = PROVIDER.samples.sample(options(), event_type, SECRET)
        headers = PROVIDER.sign(options(), sample.headers, sample.body, SECRET, now, URL)
        expected = (
            "v0="
            + hmac.new(
                SECRET.encode(), f"v0:{int(now)}:".encode() + sample.body, hashlib.sha256
            ).hexdigest()
        )
        assert headers["x-zm-signature"] == expected
        event = PROVIDER.verify(
            options(), WebhookRequest("POST", URL, headers, sample.body, now), (SECRET,)
        )
        assert isinstance(event, ParsedEvent)
        assert event.event_id == sample.event_id and event.event_type == event_type


def test_url_validation_answered_as_documented() -> None:
    verdict = PROVIDER.verify(options(), validation(), (SECRET,))
    assert isinstance(verdict, Handshake)
    assert verdict.reply.status == 200
    assert verdict.reply.content_type == "application/json"
    assert json.loads(verdict.reply.body) == VALIDATION["answer"]


def test_url_validation_hashed_with_the_secret_that_signed_it() -> None:
    verdict = PROVIDER.verify(options(), validation(), ("old-token", SECRET))
    assert isinstance(verdict, Handshake)
    assert json.loads(verdict.reply.body) == VALIDATION["answer"]


def test_url_validation_must_be_signed() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), validation(), ("old-token",))
    unsigned = {k: v for k, v in VALIDATION["headers"].items() if k != "x-zm-signature"}
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), validation(unsigned), (SECRET,))


def test_url_validation_stale_refused() -> None:
    with pytest.raises(SignatureError, match="tolerance"):
        PROVIDER.verify(options(), validation(now=float(VALIDATION["now"]) + 3600), (SECRET,))


def test_url_validation_without_token_is_a_400() -> None:
    body = b'{"event":"endpoint.url_validation","payload":{},"event_ts":1}'
    stamp = str(int(NOW))
    digest = hmac.new(SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    headers = {"x-zm-request-timestamp": stamp, "x-zm-signature": "v0=" + digest}
    with pytest.raises(BadPayload):
        PROVIDER.verify(options(), WebhookRequest("POST", URL, headers, body, NOW), (SECRET,))
