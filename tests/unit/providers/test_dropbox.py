"""Dropbox webhooks (``kind = "dropbox"``): ``X-Dropbox-Signature`` and the GET verification. The
official ``dropbox`` SDK has no webhook helper: the vector is computed with the documented algorithm
from the documentation's notification example."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest

from connectors.options import SourceOptions
from connectors.providers.dropbox import PROVIDER
from connectors.webhooks import BadPayload, Handshake, ParsedEvent, SignatureError, WebhookRequest

VECTOR: dict[str, Any] = json.loads(
    (
        Path(__file__).parents[2] / "fixtures" / "providers" / "dropbox" / "signature_vector.json"
    ).read_text()
)
SECRET = VECTOR["secret"]
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
VERIFICATION = VECTOR["verification"]


def options() -> SourceOptions:
    return SourceOptions(
        name="s", kind="dropbox", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
    )


def request(headers: dict[str, str] | None = None, body: bytes | None = None) -> WebhookRequest:
    return WebhookRequest(
        "POST",
        URL,
        VECTOR["headers"] if headers is None else headers,
        VECTOR["body"].encode() if body is None else body,
        NOW,
    )


def test_vector_verifies_and_reads_identity() -> None:
    event = PROVIDER.verify(options(), request(), (SECRET,))
    assert isinstance(event, ParsedEvent)
    assert event.event_id == f"{VECTOR['event_id']}:{int(NOW * 1000)}"  # the body's, then arrival
    assert event.event_type == VECTOR["event_type"]
    assert (event.object_type, event.object_id) == (
        "account",
        "dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc",
    )


def test_several_accounts_name_no_object() -> None:
    body = b'{"list_folder":{"accounts":["dbid:A","dbid:B"]},"delta":{"users":[1,2]}}'
    signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    event = PROVIDER.verify(options(), request({"x-dropbox-signature": signature}, body), (SECRET,))
    assert isinstance(event, ParsedEvent)
    assert event.object_id is None and event.event_type == "list_folder"


def test_rotation_second_secret_matches() -> None:
    assert isinstance(PROVIDER.verify(options(), request(), ("old-secret", SECRET)), ParsedEvent)


def test_wrong_secret_refused() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(), ("old-secret",))


def test_body_changed_by_one_byte_refused() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(
            options(), request(body=VECTOR["body"].replace("12345", "12346").encode()), (SECRET,)
        )


def test_missing_signature_refused() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request({"content-type": "application/json"}), (SECRET,))


@pytest.mark.parametrize("value", ["zz", "é€ü", "garbage signature", "00"])
def test_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request({"x-dropbox-signature": value}), (SECRET,))


def test_verification_echoes_the_challenge_as_text() -> None:
    assert "GET" in PROVIDER.methods
    get = WebhookRequest(
        "GET",
        VERIFICATION["url"],
        {},
        b"",
        NOW,
        query=tuple(VERIFICATION["query"].items()),
    )
    verdict = PROVIDER.verify(options(), get, (SECRET,))
    assert isinstance(verdict, Handshake)
    assert verdict.reply.status == 200
    assert verdict.reply.body == VERIFICATION["answer"].encode()
    assert verdict.reply.content_type.startswith("text/plain")


def test_get_without_challenge_is_a_400() -> None:
    with pytest.raises(BadPayload):
        PROVIDER.verify(options(), WebhookRequest("GET", URL, {}, b"", NOW), (SECRET,))


def test_sample_signed_verifies() -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    for event_type in PROVIDER.samples.types:
        sample = PROVIDER.samples.sample(options(), event_type, SECRET)
        headers = PROVIDER.sign(options(), sample.headers, sample.body, SECRET, NOW, URL)
        assert (
            headers["x-dropbox-signature"]
            == hmac.new(SECRET.encode(), sample.body, hashlib.sha256).hexdigest()
        )
        event = PROVIDER.verify(
            options(), WebhookRequest("POST", URL, headers, sample.body, NOW), (SECRET,)
        )
        assert isinstance(event, ParsedEvent)
        assert event.event_id == f"{sample.event_id}:{int(NOW * 1000)}"
        assert event.event_type == event_type


def test_the_same_notification_later_is_another_event() -> None:
    """A body names accounts only: an hour later the same bytes ask for another sync."""
    first = PROVIDER.verify(options(), request(), (SECRET,))
    later = PROVIDER.verify(
        options(),
        WebhookRequest("POST", URL, VECTOR["headers"], VECTOR["body"].encode(), NOW + 3600),
        (SECRET,),
    )
    assert isinstance(first, ParsedEvent) and isinstance(later, ParsedEvent)
    assert first.event_id != later.event_id
    assert first.event_id.rsplit(":", 1)[0] == later.event_id.rsplit(":", 1)[0]
