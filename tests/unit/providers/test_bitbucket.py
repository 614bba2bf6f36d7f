"""Bitbucket Cloud's ``X-Hub-Signature: sha256=<hex>`` (HMAC-SHA256 of the body), pure: the vector,
the documented algorithm both ways (Atlassian has no library that verifies: the documented algorithm
is the reference), refusals, rotation, the samples."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.bitbucket import PROVIDER
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/bitbucket/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
OPTIONS = SourceOptions(
    name="s", kind="bitbucket", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


def documented_signature(secret: str, body: bytes) -> str:
    """Bitbucket Cloud's "Secure webhooks": ``sha256=`` and the hex HMAC-SHA256 of the raw body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


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
    assert event.delivery_id == VECTOR["headers"]["x-request-uuid"]


def test_the_documented_algorithm_and_ours_agree_both_ways() -> None:
    assert documented_signature(SECRET, BODY) == VECTOR["headers"]["x-hub-signature"]
    assert PROVIDER.sign is not None
    body = b'{"issue":{"id":7},"repository":{"full_name":"acme/website"}}'
    stored = {"content-type": "application/json", "x-event-key": "issue:created"}
    stored["x-request-uuid"] = "a3c1e2d4-5f6a-4b7c-8d9e-0f1a2b3c4d5e"
    signed = PROVIDER.sign(OPTIONS, stored, body, SECRET, NOW, URL)
    assert signed["x-hub-signature"] == documented_signature(SECRET, body)
    assert signed["x-request-uuid"] == stored["x-request-uuid"]  # the identity travels again
    headers = dict(stored)
    headers["x-hub-signature"] = documented_signature(SECRET, body)
    assert isinstance(verify(headers, body), ParsedEvent)


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
        (_headers(x_hub_signature=None), BODY, (SECRET,), "missing"),
        (_headers(x_hub_signature="sha256=" + "é" * 64), BODY, (SECRET,), "not valid hex"),
        (_headers(x_hub_signature="sha256=not-a-digest"), BODY, (SECRET,), "not valid hex"),
        (_headers(x_hub_signature="sha256=" + "00" * 32), BODY, (SECRET,), "does not match"),
        (_headers(x_hub_signature="sha1=" + "00" * 20), BODY, (SECRET,), "start with|missing"),
    ],
    ids=["wrong-secret", "body-changed", "missing", "non-ascii", "garbage", "zeros", "sha1"],
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
    assert "x-hub-signature" in PROVIDER.sensitive_headers(OPTIONS)
