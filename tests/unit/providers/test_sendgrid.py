"""SendGrid (``kind = "sendgrid"``): the Signed Event Webhook, ECDSA P-256 over timestamp + body,
cross-checked both ways with the official library (``sendgrid`` 6.12.5,
``sendgrid.helpers.eventwebhook.EventWebhook``). Key pairs are made with ``cryptography``.

The vector (tests/fixtures/providers/sendgrid/signature_vector.json) was signed with cryptography
(a P-256 key from a fixed scalar) over two events of SendGrid's Event Webhook Reference example and
verified with the library.
"""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from sendgrid.helpers.eventwebhook import EventWebhook
from sendgrid.helpers.eventwebhook.eventwebhook_header import EventWebhookHeader

from connectors.options import SourceOptions
from connectors.providers.sendgrid import PROVIDER, SAMPLES
from connectors.webhooks import (
    BadPayload,
    Batch,
    Handshake,
    SignatureError,
    Verdict,
    WebhookRequest,
)

VECTOR: dict[str, Any] = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/sendgrid/signature_vector.json").read_text()
)
PRIVATE = ec.derive_private_key(int("5EED" * 16, 16), ec.SECP256R1())
SIG = EventWebhookHeader.SIGNATURE.lower()
STAMP = EventWebhookHeader.TIMESTAMP.lower()
URL = "https://hooks.example.com/webhooks/sendgrid"


def public_text(key: ec.EllipticCurvePrivateKey) -> str:
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(der).decode()


PUBLIC = public_text(PRIVATE)
OTHER_PRIVATE = ec.generate_private_key(ec.SECP256R1())


def options(public_key: str = PUBLIC) -> SourceOptions:
    return SourceOptions(
        name="s",
        kind="sendgrid",
        keys=PROVIDER.keys(public_key=public_key),
        tolerance_seconds=PROVIDER.tolerance,
    )


def verdict_of(
    headers: dict[str, str],
    body: str | bytes,
    *,
    now: float = VECTOR["now"],
    public_key: str = PUBLIC,
) -> Verdict:
    raw = body.encode() if isinstance(body, str) else body
    request = WebhookRequest("POST", URL, {k.lower(): v for k, v in headers.items()}, raw, now)
    return PROVIDER.verify(options(public_key), request, ())


def batch(headers: dict[str, str], body: str | bytes, **kwargs: Any) -> Batch:
    verdict = verdict_of(headers, body, **kwargs)
    assert isinstance(verdict, Batch)
    return verdict


def signed(body: str, stamp: int, key: ec.EllipticCurvePrivateKey = PRIVATE) -> dict[str, str]:
    signature = key.sign((str(stamp) + body).encode(), ec.ECDSA(hashes.SHA256()))
    return {SIG: base64.b64encode(signature).decode(), STAMP: str(stamp)}


def test_the_vector_verifies_and_reads_each_event() -> None:
    assert VECTOR["public_key"] == PUBLIC
    events = batch(VECTOR["headers"], VECTOR["body"]).items
    assert [item.event.event_id for item in events] == VECTOR["event_ids"]
    assert [item.event.event_type for item in events] == VECTOR["event_types"]
    first = events[0].event
    assert first.object_type == "message"
    assert (
        first.object_id == "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.000000000000000000000"
    )
    assert first.occurred_at == datetime.fromtimestamp(1513299569, UTC)
    assert json.loads(events[1].body)["response"] == "250 OK"


def test_the_library_verifies_the_vector() -> None:
    headers = VECTOR["headers"]
    assert EventWebhook(PUBLIC).verify_signature(VECTOR["body"], headers[SIG], headers[STAMP])


def test_both_ways_with_the_library() -> None:
    # SendGrid signs with its private key; the library only verifies. One key pair made here:
    # what the library accepts we accept, and what it refuses we refuse
    now = int(time.time())
    body = VECTOR["body"]
    headers = signed(body, now)
    assert EventWebhook(PUBLIC).verify_signature(body, headers[SIG], headers[STAMP])
    assert len(batch(headers, body, now=now).items) == 2
    other = signed(body, now, OTHER_PRIVATE)
    assert not EventWebhook(PUBLIC).verify_signature(body, other[SIG], other[STAMP])
    with pytest.raises(SignatureError):
        batch(other, body, now=now)


def test_the_wrong_key_is_refused() -> None:
    with pytest.raises(SignatureError):
        batch(VECTOR["headers"], VECTOR["body"], public_key=public_text(OTHER_PRIVATE))


def test_a_body_changed_by_one_byte_is_refused() -> None:
    with pytest.raises(SignatureError):
        batch(VECTOR["headers"], VECTOR["body"].replace("250 OK", "251 OK"))


@pytest.mark.parametrize("header", [SIG, STAMP])
def test_a_missing_header_is_refused(header: str) -> None:
    headers = {k: v for k, v in VECTOR["headers"].items() if k != header}
    with pytest.raises(SignatureError):
        batch(headers, VECTOR["body"])


@pytest.mark.parametrize(
    "value", ["ünïcödé", "!!!not base64!!!", "AAAA", base64.b64encode(b"x" * 70).decode()]
)
def test_a_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        batch({**VECTOR["headers"], SIG: value}, VECTOR["body"])


@pytest.mark.parametrize("shift", [-301, 301])
def test_a_timestamp_out_of_the_window_is_refused(shift: int) -> None:
    with pytest.raises(SignatureError):
        batch(VECTOR["headers"], VECTOR["body"], now=int(VECTOR["headers"][STAMP]) - shift)


def test_an_empty_array_is_answered_without_events() -> None:
    now = int(time.time())
    verdict = verdict_of(signed("[]", now), "[]", now=now)
    assert isinstance(verdict, Handshake) and verdict.reply.status == 200


@pytest.mark.parametrize("body", ['{"event":"delivered"}', '["x"]', '[{"event":"open"}]'])
def test_a_signed_body_that_is_no_batch_of_events_is_a_400(body: str) -> None:
    now = int(time.time())
    with pytest.raises(BadPayload):
        verdict_of(signed(body, now), body, now=now)


def test_the_public_key_is_required_and_checked() -> None:
    assert PROVIDER.signed_with_secret is False
    assert PROVIDER.validate({"public_key": PUBLIC}) is None
    assert PROVIDER.validate({}) is not None
    ed25519ish = base64.b64encode(b"k" * 32).decode()
    assert PROVIDER.validate({"public_key": ed25519ish}) is not None


@pytest.mark.parametrize("event_type", [None, *SAMPLES.types])
def test_the_sample_verifies_with_its_event_id(event_type: str | None) -> None:
    assert PROVIDER.samples is None  # only the provider can sign
    assert (
        PROVIDER.sign is None
    )  # only SendGrid holds the private key: signed here with the test key
    sample = SAMPLES.sample(options(), event_type, "")
    now = int(time.time())
    headers = {**sample.headers, **signed(sample.body.decode(), now)}
    events = batch(headers, sample.body, now=now).items
    assert events[-1].event.event_id == sample.event_id
    assert events[-1].event.event_type == (event_type or SAMPLES.types[0])
    assert len({item.event.event_id for item in events}) == len(events)


def test_the_signature_header_is_masked() -> None:
    assert SIG in PROVIDER.sensitive_headers(options())
