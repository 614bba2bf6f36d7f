"""Xero webhooks (``kind = "xero"``): a base64 HMAC of the body, a batch of events, the Intent to
receive. No Xero SDK verifies webhooks (xero-python 15.2.0 has no helper): the vector is computed
with the documented algorithm from the documentation's example payloads."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest

from connectors.errors import RejectedDelivery
from connectors.options import SourceOptions
from connectors.providers.xero import PROVIDER
from connectors.webhooks import BadPayload, Batch, Handshake, SignatureError, WebhookRequest

VECTOR: dict[str, Any] = json.loads(
    (
        Path(__file__).parents[2] / "fixtures" / "providers" / "xero" / "signature_vector.json"
    ).read_text()
)
SECRET = VECTOR["secret"]
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
ITR = VECTOR["intent_to_receive"]


def options() -> SourceOptions:
    return SourceOptions(
        name="s", kind="xero", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
    )


def request(headers: dict[str, str] | None = None, body: bytes | None = None) -> WebhookRequest:
    return WebhookRequest(
        "POST",
        URL,
        VECTOR["headers"] if headers is None else headers,
        VECTOR["body"].encode() if body is None else body,
        NOW,
    )


def sign(body: bytes, secret: str = SECRET) -> str:
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


def test_vector_verifies_and_reads_each_event() -> None:
    verdict = PROVIDER.verify(options(), request(), (SECRET,))
    assert isinstance(verdict, Batch)
    assert len(verdict.items) == 1
    event = verdict.items[0].event
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert (event.object_type, event.object_id) == (
        "CONTACT",
        "717f2bfc-c6d4-41fd-b238-3f2f0c0cf777",
    )
    assert event.account == "c2cc9b6e-9458-4c7d-93cc-f02b81b0594f"
    assert event.occurred_at is not None and event.occurred_at.year == 2017
    # "a 200 O.K status code … no body in the response"
    assert verdict.ack is not None and (verdict.ack.status, verdict.ack.body) == (200, b"")


def test_same_event_in_another_delivery_is_a_duplicate() -> None:
    document = json.loads(VECTOR["body"])
    other = {**document, "entropy": "ANOTHERONE", "firstEventSequence": 7, "lastEventSequence": 8}
    other["events"] = [
        {**document["events"][0], "resourceId": "0000", "resourceUrl": "x"},
        document["events"][0],
    ]
    body = json.dumps(other, separators=(",", ":")).encode()
    verdict = PROVIDER.verify(options(), request({"x-xero-signature": sign(body)}, body), (SECRET,))
    assert isinstance(verdict, Batch)
    ids = [item.event.event_id for item in verdict.items]
    assert ids[1] == VECTOR["event_id"] and ids[0] != ids[1]


def test_rotation_second_secret_matches() -> None:
    assert isinstance(PROVIDER.verify(options(), request(), ("old-key", SECRET)), Batch)


def test_wrong_secret_refused() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(), ("old-key",))


def test_body_changed_by_one_byte_refused() -> None:
    body = VECTOR["body"].replace("S0m3", "S0m4").encode()
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(body=body), (SECRET,))


def test_missing_signature_refused() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request({"content-type": "application/json"}), (SECRET,))


@pytest.mark.parametrize("value", ["not base64!", "é€ü", "AAAA", "=="])
def test_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request({"x-xero-signature": value}), (SECRET,))


def test_intent_to_receive_correctly_signed_is_a_200_without_body() -> None:
    body = ITR["body"].encode()
    verdict = PROVIDER.verify(
        options(), request({"x-xero-signature": ITR["correct_signature"]}, body), (SECRET,)
    )
    assert isinstance(verdict, Handshake)
    assert (verdict.reply.status, verdict.reply.body) == (200, b"")


def test_intent_to_receive_incorrectly_signed_is_a_401() -> None:
    body = ITR["body"].encode()
    with pytest.raises(RejectedDelivery) as caught:
        PROVIDER.verify(
            options(), request({"x-xero-signature": ITR["incorrect_signature"]}, body), (SECRET,)
        )
    assert caught.value.status_code == 401


def test_signed_body_without_events_list_is_a_400() -> None:
    body = b'{"entropy":"X"}'
    with pytest.raises(BadPayload):
        PROVIDER.verify(options(), request({"x-xero-signature": sign(body)}, body), (SECRET,))


def test_sample_signed_verifies() -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    for event_type in PROVIDER.samples.types:
        sample = PROVIDER.samples.sample(options(), event_type, SECRET)
        headers = PROVIDER.sign(options(), sample.headers, sample.body, SECRET, NOW, URL)
        assert headers["x-xero-signature"] == sign(sample.body)
        verdict = PROVIDER.verify(
            options(), WebhookRequest("POST", URL, headers, sample.body, NOW), (SECRET,)
        )
        assert isinstance(verdict, Batch)
        assert verdict.items[0].event.event_id == sample.event_id
        assert verdict.items[0].event.event_type == event_type
