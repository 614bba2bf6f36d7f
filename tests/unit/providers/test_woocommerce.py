"""WooCommerce's ``X-WC-Webhook-Signature`` (base64 HMAC-SHA256 of the body), pure: a computed vector
(WooCommerce publishes none and has no Python library that verifies: ``generate_signature`` in
``class-wc-webhook.php`` is the reference, transcribed below), refusals, rotation, the ping, the
samples."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.woocommerce import PROVIDER
from connectors.webhooks import Handshake, SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/woocommerce/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
HEADERS: dict[str, str] = VECTOR["headers"]
OPTIONS = SourceOptions(
    name="s", kind="woocommerce", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


def generate_signature(payload: bytes, secret: str) -> str:
    """WC_Webhook::generate_signature: base64_encode(hash_hmac('sha256', $payload, $secret, true))."""
    return base64.b64encode(hmac.new(secret.encode(), payload, hashlib.sha256).digest()).decode()


def without(name: str) -> dict[str, str]:
    return {k: v for k, v in HEADERS.items() if k != name}


def verify(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> Verdict:
    return PROVIDER.verify(OPTIONS, WebhookRequest("POST", URL, headers, body, NOW), secrets)


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(HEADERS)
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert (event.object_type, event.object_id) == ("order", VECTOR["object_id"])
    assert event.delivery_id == HEADERS["x-wc-webhook-delivery-id"]
    assert event.occurred_at is not None
    assert event.occurred_at.isoformat() == VECTOR["occurred_at"]


def test_the_reference_algorithm_and_ours_agree_both_ways() -> None:
    assert generate_signature(BODY, SECRET) == HEADERS["x-wc-webhook-signature"]
    assert PROVIDER.sign is not None
    signed = PROVIDER.sign(OPTIONS, without("x-wc-webhook-signature"), BODY, SECRET, NOW, URL)
    assert signed["x-wc-webhook-signature"] == generate_signature(BODY, SECRET)
    # the topic and the other WooCommerce headers travel with a re-signed delivery
    assert signed["x-wc-webhook-topic"] == "order.created"
    body = b'{"id":93,"name":"Woo Single #1","date_modified_gmt":"2017-03-22T19:28:08"}'
    headers = {**HEADERS, "x-wc-webhook-signature": generate_signature(body, SECRET)}
    assert isinstance(verify(headers, body), ParsedEvent)


def test_the_topic_is_part_of_the_identity() -> None:
    assert PROVIDER.sign is not None
    updated = {**HEADERS, "x-wc-webhook-topic": "order.updated", "x-wc-webhook-event": "updated"}
    created, again = verify(HEADERS), verify(updated)
    assert isinstance(created, ParsedEvent) and isinstance(again, ParsedEvent)
    assert created.event_id != again.event_id
    # another delivery id (every delivery has one) of the same content is the same event
    resent = verify({**HEADERS, "x-wc-webhook-delivery-id": "0" * 32})
    assert isinstance(resent, ParsedEvent) and resent.event_id == created.event_id


def test_refusals() -> None:
    bad = [
        (HEADERS, BODY, ("another-secret",)),
        (HEADERS, BODY.replace(b'"total":"29.35"', b'"total":"29.36"'), (SECRET,)),
        (HEADERS, BODY + b"\n", (SECRET,)),
        (without("x-wc-webhook-signature"), BODY, (SECRET,)),
        ({**HEADERS, "x-wc-webhook-signature": "é" * 44}, BODY, (SECRET,)),
        ({**HEADERS, "x-wc-webhook-signature": "***"}, BODY, (SECRET,)),
        (
            {**HEADERS, "x-wc-webhook-signature": HEADERS["x-wc-webhook-signature"][:-4]},
            BODY,
            (SECRET,),
        ),
        # a ping body that carries a signature is checked like any delivery
        ({**HEADERS}, b"webhook_id=12", (SECRET,)),
    ]
    for headers, body, secrets in bad:
        with pytest.raises(SignatureError):
            verify(headers, body, secrets)


def test_rotation_the_second_secret_matches() -> None:
    assert isinstance(verify(HEADERS, secrets=("old-secret", SECRET)), ParsedEvent)


def test_the_ping_is_answered_200_and_stores_nothing() -> None:
    headers = {
        "content-type": "application/x-www-form-urlencoded",
        "user-agent": "WooCommerce/9.4.2 Hookshot (WordPress/6.7.1)",
    }
    verdict = verify(headers, b"webhook_id=12")
    assert isinstance(verdict, Handshake)
    assert verdict.reply.status == 200  # deliver_ping(): "200 !== $response_code" is an error
    assert verdict.reply.body == b""
    # anything else unsigned is refused
    for body in (b"webhook_id=12&x=1", b"webhook_id=abc", b"{}", b""):
        with pytest.raises(SignatureError):
            verify(headers, body)


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_the_samples_verify_with_their_own_identity(event_type: str) -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    sample = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert sample.headers["x-wc-webhook-topic"] == event_type
    headers = PROVIDER.sign(OPTIONS, sample.headers, sample.body, SECRET, NOW, URL)
    assert headers["x-wc-webhook-signature"] == generate_signature(sample.body, SECRET)
    event = verify(headers, sample.body)
    assert isinstance(event, ParsedEvent)
    assert (event.event_id, event.event_type) == (sample.event_id, event_type)
    assert event.object_id == str(json.loads(sample.body)["id"])
    assert event.occurred_at is not None
