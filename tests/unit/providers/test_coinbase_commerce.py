"""Coinbase Commerce's ``X-CC-Webhook-Signature`` (hex HMAC-SHA256 of the body), pure: the vector,
coinbase-commerce's ``WebhookSignature`` both ways, refusals, rotation, the samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from coinbase_commerce.error import SignatureVerificationError
from coinbase_commerce.webhook import Webhook, WebhookSignature

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.coinbase_commerce import PROVIDER
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (
        Path(__file__).parents[2] / "fixtures/providers/coinbase_commerce/signature_vector.json"
    ).read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
HEADER = "x-cc-webhook-signature"
OPTIONS = SourceOptions(
    name="s", kind="coinbase_commerce", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


def verify(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> Verdict:
    return PROVIDER.verify(OPTIONS, WebhookRequest("POST", URL, headers, body, NOW), secrets)


def sign(body: bytes, secret: str = SECRET) -> dict[str, str]:
    assert PROVIDER.sign is not None
    return PROVIDER.sign(OPTIONS, {"content-type": "application/json"}, body, secret, NOW, URL)


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(VECTOR["headers"])
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert event.delivery_id == VECTOR["delivery_id"]
    assert event.object_id == VECTOR["object_id"]
    assert event.occurred_at is not None and event.occurred_at.year == 2023
    assert PROVIDER.sensitive_headers(OPTIONS) == frozenset({HEADER})


def test_coinbases_library_and_hookledger_agree_both_ways() -> None:
    body = '{"id":"d1","attempt_number":2,"event":{"id":"e1","type":"charge:confirmed","data":{}}}'
    # what the library signs, we accept
    theirs = WebhookSignature._compute_signature(body, SECRET)
    event = verify({HEADER: theirs}, body.encode())
    assert isinstance(event, ParsedEvent) and event.event_id == "e1"
    # what we sign, the library accepts (and reads as its event); another key's, it refuses
    ours = sign(body.encode())[HEADER]
    assert ours == theirs
    assert WebhookSignature.verify_sig_header(body, ours, SECRET)
    assert Webhook.construct_event(body, ours, SECRET).id == "e1"
    with pytest.raises(SignatureVerificationError):
        WebhookSignature.verify_sig_header(body, sign(body.encode(), "other")[HEADER], SECRET)
    # the vector, through the library
    assert WebhookSignature.verify_sig_header(VECTOR["body"], VECTOR["headers"][HEADER], SECRET)


def test_a_retry_is_the_same_event() -> None:
    document = json.loads(BODY)
    document["attempt_number"] = 2
    retry = json.dumps(document, separators=(",", ":")).encode()
    event = verify(sign(retry), retry)
    assert isinstance(event, ParsedEvent) and event.event_id == VECTOR["event_id"]


def test_a_wrong_secret_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], secrets=("not_the_secret",))


def test_a_body_changed_by_one_byte_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], BODY.replace(b'"1.00"', b'"1.01"'))


def test_a_missing_signature_is_refused() -> None:
    with pytest.raises(SignatureError, match="missing"):
        verify({"content-type": "application/json"})


@pytest.mark.parametrize("value", ["é" * 64, "g" * 64, "abc", " ", "sha256=00"])
def test_a_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        verify({HEADER: value})


def test_rotation_the_second_secret_matches() -> None:
    event = verify(VECTOR["headers"], secrets=("old_shared_secret", SECRET))
    assert isinstance(event, ParsedEvent) and event.event_id == VECTOR["event_id"]


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_every_sample_verifies_and_is_its_own_event(event_type: str) -> None:
    assert PROVIDER.samples is not None
    first = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    second = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert first.event_id != second.event_id
    event = verify({**first.headers, **sign(first.body)}, first.body)
    assert isinstance(event, ParsedEvent)
    assert event.event_id == first.event_id
    assert event.event_type == event_type
    assert event.object_id is not None and event.occurred_at is not None
