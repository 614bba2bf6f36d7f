"""Razorpay's ``X-Razorpay-Signature`` (hex HMAC-SHA256 of the body), pure: the library's published
vector, razorpay's ``Utility.verify_webhook_signature`` (it only verifies: its vector is the other
direction), the event id header, refusals, rotation, the samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import razorpay
from razorpay.errors import SignatureVerificationError

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.razorpay import PROVIDER, SCHEME
from connectors.webhooks import BadPayload, SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/razorpay/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
HEADER = "x-razorpay-signature"
OPTIONS = SourceOptions(
    name="s", kind="razorpay", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)
UTILITY = razorpay.Client(auth=("rzp_test_key_id", "rzp_test_key_secret")).utility


def verify(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> Verdict:
    return PROVIDER.verify(OPTIONS, WebhookRequest("POST", URL, headers, body, NOW), secrets)


def sign(body: bytes, headers: dict[str, str], secret: str = SECRET) -> dict[str, str]:
    assert PROVIDER.sign is not None
    return PROVIDER.sign(OPTIONS, headers, body, secret, NOW, URL)


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(VECTOR["headers"])
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert event.object_type == VECTOR["object_type"]
    assert event.object_id == VECTOR["object_id"]
    assert event.occurred_at is not None and int(event.occurred_at.timestamp()) == int(NOW)
    assert PROVIDER.sensitive_headers(OPTIONS) == frozenset({HEADER})


def test_razorpays_library_and_hookledger_agree_both_ways() -> None:
    # the library's own vector (what Razorpay signs), the library and we accept it
    assert UTILITY.verify_webhook_signature(VECTOR["body"], VECTOR["headers"][HEADER], SECRET)
    # what we sign, the library accepts; and refuses it under another secret
    body = '{"entity":"event","event":"payment.captured","contains":["payment"],"payload":{}}'
    ours = sign(body.encode(), {"x-razorpay-event-id": "EvT1"})
    assert ours["x-razorpay-event-id"] == "EvT1"  # carried when a delivery is signed again
    assert UTILITY.verify_webhook_signature(body, ours[HEADER], SECRET)
    with pytest.raises(SignatureVerificationError):
        UTILITY.verify_webhook_signature(body, ours[HEADER], "another_secret")


def test_the_event_id_is_the_header_and_required() -> None:
    headers = {k: v for k, v in VECTOR["headers"].items() if k != "x-razorpay-event-id"}
    with pytest.raises(BadPayload, match="missing event id"):
        verify(headers)
    assert SCHEME.event_id == "header:x-razorpay-event-id"


def test_an_order_event_names_the_order_not_its_payment() -> None:
    body = (
        b'{"entity":"event","event":"order.paid","contains":["payment","order"],'
        b'"payload":{"payment":{"entity":{"id":"pay_1"}},"order":{"entity":{"id":"order_1"}}},'
        b'"created_at":1700000000}'
    )
    event = verify({**sign(body, {"x-razorpay-event-id": "E2"}), "x-razorpay-event-id": "E2"}, body)
    assert isinstance(event, ParsedEvent)
    assert (event.object_type, event.object_id) == ("order", "order_1")


def test_a_wrong_secret_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], secrets=("not_the_secret",))


def test_a_body_changed_by_one_byte_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], BODY.rstrip(b"\n"))
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], BODY.replace(b"1000000", b"1000001"))


def test_a_missing_signature_is_refused() -> None:
    with pytest.raises(SignatureError, match="missing"):
        verify({"x-razorpay-event-id": "E1"})


@pytest.mark.parametrize("value", ["é" * 64, "zz" * 32, "sha256=" + "0" * 64, "0", "\x7f"])
def test_a_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        verify({HEADER: value, "x-razorpay-event-id": "E1"})


def test_rotation_the_second_secret_matches() -> None:
    event = verify(VECTOR["headers"], secrets=("old_secret", SECRET))
    assert isinstance(event, ParsedEvent) and event.event_id == VECTOR["event_id"]


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_every_sample_verifies_and_is_its_own_event(event_type: str) -> None:
    assert PROVIDER.samples is not None
    first = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    second = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert first.event_id != second.event_id
    event = verify({**first.headers, **sign(first.body, first.headers)}, first.body)
    assert isinstance(event, ParsedEvent)
    assert event.event_id == first.event_id
    assert event.event_type == event_type
    assert event.object_type == event_type.split(".")[0]
    assert event.object_id is not None
