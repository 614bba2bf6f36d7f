"""Linear's ``Linear-Signature`` (hex HMAC-SHA256 of the body) with the body's signed
``webhookTimestamp`` (ms, ± 60 s), pure: the vector (accepted by the official SDK, npm
``@linear/sdk`` 98.0.0, when it was made; Linear has no Python library), the SDK's algorithm both
ways, refusals, rotation, ``<type>.<action>`` types, re-signing, the samples."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.linear import PROVIDER
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/linear/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
OPTIONS = SourceOptions(
    name="s", kind="linear", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


def sdk_signature(secret: str, body: bytes) -> str:
    """``LinearWebhookClient.verify``: createHmac("sha256", secret).update(rawBody).digest("hex")."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def request(headers: dict[str, str], body: bytes = BODY, now: float = NOW) -> WebhookRequest:
    return WebhookRequest("POST", URL, headers, body, now)


def verify(
    headers: dict[str, str],
    body: bytes = BODY,
    secrets: tuple[str, ...] = (SECRET,),
    now: float = NOW,
) -> Verdict:
    return PROVIDER.verify(OPTIONS, request(headers, body, now), secrets)


def _headers(**changes: str | None) -> dict[str, str]:
    headers = dict(VECTOR["headers"])
    for name, value in changes.items():
        key = name.replace("_", "-")
        if value is None:
            headers.pop(key, None)
        else:
            headers[key] = value
    return headers


def _body(timestamp_ms: int, action: str = "update") -> bytes:
    document = {"action": action, "type": "Comment", "data": {"id": "c1"}}
    return json.dumps(document | {"webhookTimestamp": timestamp_ms}).encode()


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(VECTOR["headers"])
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"] == VECTOR["headers"]["linear-delivery"]
    assert event.event_type == VECTOR["event_type"] == "Issue.create"
    assert event.object_type == "Issue"
    assert event.object_id == "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9"
    assert event.occurred_at is not None and event.occurred_at.year == 2025
    assert PROVIDER.tolerance == 60


def test_the_sdks_algorithm_and_ours_agree_both_ways() -> None:
    assert sdk_signature(SECRET, BODY) == VECTOR["headers"]["linear-signature"]
    assert PROVIDER.sign is not None
    body = _body(int(NOW * 1000))
    stored = {"content-type": "application/json", "linear-event": "Comment"}
    stored["linear-delivery"] = "a3c1e2d4-5f6a-4b7c-8d9e-0f1a2b3c4d5e"
    signed = PROVIDER.sign(OPTIONS, stored, body, SECRET, NOW + 30, URL)
    assert signed["linear-signature"] == sdk_signature(SECRET, body)
    assert signed["linear-delivery"] == stored["linear-delivery"]  # the identity travels again
    event = verify(stored | {"linear-signature": sdk_signature(SECRET, body)}, body)
    assert isinstance(event, ParsedEvent)
    assert (event.event_id, event.event_type) == (stored["linear-delivery"], "Comment.update")


@pytest.mark.parametrize(
    ("headers", "body", "secrets", "reason"),
    [
        (VECTOR["headers"], BODY, ("another-secret",), "does not match"),
        (VECTOR["headers"], BODY.replace(b"one cent", b"two cent"), (SECRET,), "does not match"),
        (_headers(linear_signature=None), BODY, (SECRET,), "missing"),
        (_headers(linear_signature="é" * 64), BODY, (SECRET,), "not valid hex"),
        (_headers(linear_signature="not-a-digest"), BODY, (SECRET,), "not valid hex"),
        (_headers(linear_signature="00" * 32), BODY, (SECRET,), "does not match"),
    ],
    ids=["wrong-secret", "body-changed", "missing", "non-ascii", "garbage", "zeros"],
)
def test_a_refused_delivery_is_a_401_naming_why(
    headers: dict[str, str], body: bytes, secrets: tuple[str, ...], reason: str
) -> None:
    with pytest.raises(SignatureError, match=reason) as raised:
        verify(headers, body, secrets)
    assert raised.value.status_code == 401


@pytest.mark.parametrize(("offset", "word"), [(61, "too old"), (-61, "too new")])
def test_a_timestamp_beyond_60_seconds_either_way_is_refused(offset: int, word: str) -> None:
    """As the SDK: |now - webhookTimestamp| > 60 s is refused; within it, accepted."""
    with pytest.raises(SignatureError, match=word):
        verify(VECTOR["headers"], now=NOW + offset)
    assert isinstance(
        verify(VECTOR["headers"], now=NOW + offset - offset // abs(offset) * 2), ParsedEvent
    )


def test_a_body_without_its_signed_timestamp_is_refused() -> None:
    body = b'{"action":"create","type":"Issue","data":{"id":"i1"}}'
    headers = {"linear-delivery": "d1", "linear-signature": sdk_signature(SECRET, body)}
    with pytest.raises(SignatureError, match="missing timestamp"):
        verify(headers, body)
    stamped = _body(int(NOW * 1000)).replace(b'"webhookTimestamp": ', b'"webhookTimestamp": "x')
    with pytest.raises(SignatureError):
        verify(headers | {"linear-signature": sdk_signature(SECRET, stamped)}, stamped)


def test_rotation_any_configured_secret_may_match() -> None:
    event = verify(VECTOR["headers"], secrets=("the-old-one", SECRET))
    assert isinstance(event, ParsedEvent)


def test_re_signing_keeps_the_body_and_its_time() -> None:
    """A stored delivery signed again keeps its webhookTimestamp: refused once 60 s have passed."""
    assert PROVIDER.sign is not None
    stored = {"linear-delivery": VECTOR["event_id"], "linear-event": "Issue"}
    again = stored | PROVIDER.sign(OPTIONS, stored, BODY, SECRET, NOW + 3600, URL)
    assert isinstance(verify(again), ParsedEvent)
    with pytest.raises(SignatureError, match="too old"):
        verify(again, now=NOW + 3600)


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_each_sample_signed_verifies_on_its_own_id(event_type: str) -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    sample = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    again = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert sample.event_id != again.event_id
    now = time.time()
    headers = sample.headers | PROVIDER.sign(OPTIONS, sample.headers, sample.body, SECRET, now, URL)
    event = PROVIDER.verify(OPTIONS, request(headers, sample.body, now), (SECRET,))
    assert isinstance(event, ParsedEvent)
    assert (event.event_id, event.event_type) == (sample.event_id, event_type)


def test_the_signature_header_is_masked() -> None:
    assert "linear-signature" in PROVIDER.sensitive_headers(OPTIONS)
