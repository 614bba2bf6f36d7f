"""Chargebee's HTTP Basic credentials (no signature), pure: the constructed vector, refusals,
rotation, the samples read back with the official ``chargebee`` library (which verifies nothing:
Chargebee signs nothing; the credentials are RFC 7617's)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import chargebee
import pytest

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.chargebee import PROVIDER
from connectors.webhooks import BadPayload, SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/chargebee/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
OPTIONS = SourceOptions(
    name="s", kind="chargebee", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)
CHARGEBEE = chargebee.Chargebee(api_key="test_unused", site="hookledger-test")


def basic(user_password: str) -> dict[str, str]:
    """RFC 7617: ``Basic`` and the base64 of ``user:password``."""
    encoded = base64.b64encode(user_password.encode()).decode()
    return {"content-type": "application/json", "authorization": f"Basic {encoded}"}


def verify(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> Verdict:
    return PROVIDER.verify(OPTIONS, WebhookRequest("POST", URL, headers, body, NOW), secrets)


def test_the_vector_verifies_and_reads_its_identity() -> None:
    assert VECTOR["headers"] == basic(SECRET)
    event = verify(VECTOR["headers"])
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert event.occurred_at is not None
    assert int(event.occurred_at.timestamp()) == VECTOR["occurred_at"]


def test_the_official_library_reads_the_vector_as_we_do() -> None:
    read = CHARGEBEE.Event.deserialize(VECTOR["body"])
    assert (read.id, read.event_type, read.occurred_at) == (
        VECTOR["event_id"],
        VECTOR["event_type"],
        VECTOR["occurred_at"],
    )


def test_refusals() -> None:
    for headers in (
        basic("hookledger:wrong"),
        basic("someone:" + SECRET.partition(":")[2]),
        {"content-type": "application/json"},
        {"authorization": "Basic é€"},
        {"authorization": "Basic !!!not-base64!!!"},
        {"authorization": "Bearer " + VECTOR["headers"]["authorization"][6:]},
        {"authorization": "Basic " + base64.b64encode(b"\xff\xfe:x").decode()},
    ):
        with pytest.raises(SignatureError):
            verify(headers)


def test_the_body_is_not_authenticated_but_must_be_an_event() -> None:
    # Basic credentials authenticate the sender, not the bytes: a changed body is still read
    changed = verify(VECTOR["headers"], BODY.replace(b"not_configured", b"scheduled"))
    assert isinstance(changed, ParsedEvent)
    with pytest.raises(BadPayload):
        verify(VECTOR["headers"], b'{"event_type": "subscription_created"}')
    with pytest.raises(BadPayload):
        verify(VECTOR["headers"], b"not json")


def test_rotation_the_second_secret_matches() -> None:
    assert isinstance(verify(VECTOR["headers"], secrets=("old:password", SECRET)), ParsedEvent)


def test_sign_sends_the_credentials() -> None:
    assert PROVIDER.sign is not None
    headers = PROVIDER.sign(OPTIONS, {}, BODY, SECRET, NOW, URL)
    assert headers["authorization"] == VECTOR["headers"]["authorization"]
    assert "authorization" in PROVIDER.sensitive_headers(OPTIONS)


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_the_samples_verify_and_the_library_reads_them(event_type: str) -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    sample = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert sample.event_id != PROVIDER.samples.sample(OPTIONS, event_type, SECRET).event_id
    headers = PROVIDER.sign(OPTIONS, sample.headers, sample.body, SECRET, NOW, URL)
    event = verify(headers, sample.body)
    assert isinstance(event, ParsedEvent)
    assert (event.event_id, event.event_type) == (sample.event_id, event_type)
    read = CHARGEBEE.Event.deserialize(sample.body.decode())
    assert (read.id, read.event_type) == (sample.event_id, event_type)
    assert read.api_version == "v2" and isinstance(read.content, dict)
