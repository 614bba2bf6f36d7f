"""Sentry's ``Sentry-Hook-Signature`` (hex HMAC-SHA256 of the body with the Client Secret), pure: the
vector, the documented algorithm both ways (``sentry-sdk`` does not verify webhooks: Sentry's
documented example is the reference), refusals, rotation, ``<resource>.<action>`` types, samples."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.sentry import PROVIDER
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/sentry/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
OPTIONS = SourceOptions(
    name="s", kind="sentry", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


def documented_signature(secret: str, body: bytes) -> str:
    """Sentry's "Verifying the Signature": hmac(client_secret, body, sha256).hexdigest()."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def request(headers: dict[str, str], body: bytes = BODY, now: float = NOW) -> WebhookRequest:
    return WebhookRequest("POST", URL, headers, body, now)


def verify(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> Verdict:
    return PROVIDER.verify(OPTIONS, request(headers, body), secrets)


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(VECTOR["headers"])
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert event.delivery_id == VECTOR["headers"]["request-id"]
    assert event.object_type == "issue"
    assert event.occurred_at is not None and event.occurred_at.timestamp() == NOW


def test_the_documented_algorithm_and_ours_agree_both_ways() -> None:
    assert documented_signature(SECRET, BODY) == VECTOR["headers"]["sentry-hook-signature"]
    assert PROVIDER.sign is not None
    body = b'{"action":"triggered","data":{"event":{"event_id":"e1"}}}'
    stored = {"content-type": "application/json", "sentry-hook-resource": "event_alert"}
    stored["request-id"] = "a3c1e2d4-5f6a-4b7c-8d9e-0f1a2b3c4d5e"
    signed = PROVIDER.sign(OPTIONS, stored, body, SECRET, NOW, URL)
    assert signed["sentry-hook-signature"] == documented_signature(SECRET, body)
    assert signed["request-id"] == stored["request-id"]  # the identity travels again
    headers = dict(stored)
    headers["sentry-hook-signature"] = documented_signature(SECRET, body)
    event = verify(headers, body)
    assert isinstance(event, ParsedEvent)
    assert (event.event_id, event.event_type) == (stored["request-id"], "event_alert.triggered")


def _headers(**changes: str | None) -> dict[str, str]:
    headers = dict(VECTOR["headers"])
    for name, value in changes.items():
        key = name.replace("_", "-")
        if value is None:
            headers.pop(key, None)
        else:
            headers[key] = value
    return headers


@pytest.mark.parametrize(
    ("headers", "body", "secrets", "reason"),
    [
        (VECTOR["headers"], BODY, ("another-secret",), "does not match"),
        (VECTOR["headers"], BODY[:-2] + b" }", (SECRET,), "does not match"),
        (_headers(sentry_hook_signature=None), BODY, (SECRET,), "missing"),
        (_headers(sentry_hook_signature="é" * 64), BODY, (SECRET,), "not valid hex"),
        (_headers(sentry_hook_signature="not-a-digest"), BODY, (SECRET,), "not valid hex"),
        (_headers(sentry_hook_signature="00" * 32), BODY, (SECRET,), "does not match"),
    ],
    ids=["wrong-secret", "body-changed", "missing", "non-ascii", "garbage", "zeros"],
)
def test_a_refused_delivery_is_a_401_naming_why(
    headers: dict[str, str], body: bytes, secrets: tuple[str, ...], reason: str
) -> None:
    with pytest.raises(SignatureError, match=reason) as raised:
        verify(headers, body, secrets)
    assert raised.value.status_code == 401


def test_rotation_any_configured_secret_may_match() -> None:
    event = verify(VECTOR["headers"], secrets=("the-old-one", SECRET))
    assert isinstance(event, ParsedEvent)


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_each_sample_signed_verifies_on_its_own_id(event_type: str) -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    sample = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    again = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert sample.event_id != again.event_id
    headers = sample.headers | PROVIDER.sign(OPTIONS, sample.headers, sample.body, SECRET, NOW, URL)
    event = PROVIDER.verify(OPTIONS, request(headers, sample.body), (SECRET,))
    assert isinstance(event, ParsedEvent)
    assert (event.event_id, event.event_type) == (sample.event_id, event_type)


def test_the_signature_header_is_masked() -> None:
    assert "sentry-hook-signature" in PROVIDER.sensitive_headers(OPTIONS)


def test_the_unsigned_timestamp_bounds_nothing() -> None:
    """``Sentry-Hook-Timestamp`` is not signed: an old one is no reason to refuse (nor proof)."""
    later = PROVIDER.verify(OPTIONS, request(VECTOR["headers"], now=NOW + 86_400), (SECRET,))
    assert isinstance(later, ParsedEvent)


def test_a_body_without_an_action_is_typed_by_its_resource() -> None:
    body = b'{"data":{"installation":{"uuid":"u1"}}}'
    headers = {"request-id": "r1", "sentry-hook-resource": "installation"}
    headers["sentry-hook-signature"] = documented_signature(SECRET, body)
    event = verify(headers, body)
    assert isinstance(event, ParsedEvent) and event.event_type == "installation"
