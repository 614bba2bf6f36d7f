"""Twitch EventSub (``kind = "twitch"``): the documented signature, the callback's challenge and
revocations. No official Python library verifies EventSub messages: the vector is computed with the
documented algorithm from the documentation's example payload."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest

from connectors.options import SourceOptions
from connectors.providers.twitch import PROVIDER
from connectors.webhooks import (
    BadPayload,
    Handshake,
    ParsedEvent,
    SignatureError,
    WebhookRequest,
)

VECTOR: dict[str, Any] = json.loads(
    (
        Path(__file__).parents[2] / "fixtures" / "providers" / "twitch" / "signature_vector.json"
    ).read_text()
)
SECRET = VECTOR["secret"]
NOW = float(VECTOR["now"])
URL = VECTOR["url"]


def options(tolerance: int | None = None) -> SourceOptions:
    return SourceOptions(
        name="s",
        kind="twitch",
        keys=PROVIDER.keys(),
        tolerance_seconds=PROVIDER.tolerance if tolerance is None else tolerance,
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


def signed(
    message_type: str, body: bytes, secret: str = SECRET, now: float = NOW
) -> WebhookRequest:
    stamp = "2019-11-16T10:11:12.634234626Z"
    headers = {
        "content-type": "application/json",
        "twitch-eventsub-message-id": "e76c6bd4-55c9-4987-8304-da1588d8988b",
        "twitch-eventsub-message-type": message_type,
        "twitch-eventsub-message-timestamp": stamp,
    }
    digest = hmac.new(
        secret.encode(),
        (headers["twitch-eventsub-message-id"] + stamp).encode() + body,
        hashlib.sha256,
    ).hexdigest()
    headers["twitch-eventsub-message-signature"] = "sha256=" + digest
    return WebhookRequest("POST", URL, headers, body, now)


def test_vector_verifies_and_reads_identity() -> None:
    event = PROVIDER.verify(options(), request(), (SECRET,))
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert (event.object_type, event.object_id) == ("broadcaster", "1337")
    assert event.occurred_at is not None and event.occurred_at.year == 2019  # nanoseconds parsed


def test_rotation_second_secret_matches() -> None:
    event = PROVIDER.verify(options(), request(), ("another-secret-entirely", SECRET))
    assert isinstance(event, ParsedEvent)


def test_wrong_secret_refused() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(), ("another-secret-entirely",))


def test_body_changed_by_one_byte_refused() -> None:
    body = VECTOR["body"].replace("1234", "1235", 1).encode()
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(body=body), (SECRET,))


def test_message_id_is_signed() -> None:
    headers = {**VECTOR["headers"], "twitch-eventsub-message-id": "another-id"}
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(headers), (SECRET,))


@pytest.mark.parametrize(
    "name",
    ["twitch-eventsub-message-signature", "twitch-eventsub-message-timestamp"],
)
def test_missing_header_refused(name: str) -> None:
    headers = {k: v for k, v in VECTOR["headers"].items() if k != name}
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(headers), (SECRET,))


@pytest.mark.parametrize("value", ["sha256=zzzz", "sha256=é€", "garbage", "sha256=", "v0=abcd"])
def test_garbage_signature_is_a_401(value: str) -> None:
    headers = {**VECTOR["headers"], "twitch-eventsub-message-signature": value}
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(headers), (SECRET,))


def test_stale_timestamp_refused_after_ten_minutes() -> None:
    assert PROVIDER.tolerance == 600
    PROVIDER.verify(options(), request(now=NOW + 590), (SECRET,))
    with pytest.raises(SignatureError, match="tolerance"):
        PROVIDER.verify(options(), request(now=NOW + 601), (SECRET,))


def test_sample_signed_verifies() -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    for event_type in PROVIDER.samples.types:
        sample = PROVIDER.samples.sample(options(), event_type, SECRET)
        now = 1_800_000_000.0
        headers = PROVIDER.sign(options(), sample.headers, sample.body, SECRET, now, URL)
        event = PROVIDER.verify(
            options(), WebhookRequest("POST", URL, headers, sample.body, now), (SECRET,)
        )
        assert isinstance(event, ParsedEvent)
        assert event.event_id == sample.event_id
        assert event.event_type == event_type


def test_resigned_vector_keeps_its_identity() -> None:
    assert PROVIDER.sign is not None
    body = VECTOR["body"].encode()
    headers = PROVIDER.sign(options(), VECTOR["headers"], body, SECRET, NOW + 5000, URL)
    assert headers["twitch-eventsub-message-id"] == VECTOR["event_id"]
    event = PROVIDER.verify(
        options(), WebhookRequest("POST", URL, headers, body, NOW + 5000), (SECRET,)
    )
    assert isinstance(event, ParsedEvent) and event.event_id == VECTOR["event_id"]


def test_callback_verification_answers_the_challenge_as_text() -> None:
    body = json.dumps(
        {
            "challenge": "pogchamp-kappa-360noscope-vohiyo",
            "subscription": {"id": "f1c2", "status": "webhook_callback_verification_pending"},
        }
    ).encode()
    verdict = PROVIDER.verify(options(), signed("webhook_callback_verification", body), (SECRET,))
    assert isinstance(verdict, Handshake)
    assert verdict.reply.status == 200
    assert verdict.reply.body == b"pogchamp-kappa-360noscope-vohiyo"
    assert verdict.reply.content_type.startswith("text/plain")


def test_callback_verification_is_signed() -> None:
    body = b'{"challenge":"abc","subscription":{}}'
    with pytest.raises(SignatureError):
        PROVIDER.verify(
            options(), signed("webhook_callback_verification", body, "nope-nope-nope"), (SECRET,)
        )


def test_revocation_is_acknowledged_not_stored() -> None:
    body = json.dumps(
        {
            "subscription": {
                "id": "f1c2a387-161a-49f9-a165-0f21d7a4e1c4",
                "status": "authorization_revoked",
                "type": "channel.follow",
                "version": "2",
            }
        }
    ).encode()
    verdict = PROVIDER.verify(options(), signed("revocation", body), (SECRET,))
    assert isinstance(verdict, Handshake)
    assert verdict.reply.status == 204 and verdict.reply.body == b""
    assert "authorization_revoked" in verdict.what and "channel.follow" in verdict.what


def test_revocation_is_signed() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), signed("revocation", b"{}", "nope-nope-nope"), (SECRET,))


def test_unknown_message_type_is_a_400() -> None:
    with pytest.raises(BadPayload):
        PROVIDER.verify(options(), signed("something_else", VECTOR["body"].encode()), (SECRET,))


def test_signature_header_is_masked() -> None:
    assert "twitch-eventsub-message-signature" in PROVIDER.sensitive_headers(options())
