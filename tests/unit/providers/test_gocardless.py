"""GoCardless' ``Webhook-Signature`` (hex HMAC-SHA256 of the body) over a batch of events, pure: the
official library's own vector, ``gocardless_pro.webhooks`` both ways, refusals (498), rotation, the
samples."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import gocardless_pro.webhooks as gc_webhooks
import pytest
from gocardless_pro.errors import InvalidSignatureError

from connectors.options import SourceOptions
from connectors.providers.gocardless import PROVIDER
from connectors.webhooks import Batch, Handshake, SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/gocardless/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
OPTIONS = SourceOptions(
    name="s", kind="gocardless", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)
SIGNATURE = VECTOR["headers"]["webhook-signature"]


def verify(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> Verdict:
    return PROVIDER.verify(OPTIONS, WebhookRequest("POST", URL, headers, body, NOW), secrets)


def refused(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> None:
    with pytest.raises(SignatureError) as caught:
        verify(headers, body, secrets)
    assert caught.value.status_code == 498  # "must return a 498 Token Invalid error"


def test_the_vector_verifies_as_a_batch_of_two_events() -> None:
    verdict = verify(VECTOR["headers"])
    assert isinstance(verdict, Batch)
    events = [item.event for item in verdict.items]
    assert [e.event_id for e in events] == VECTOR["event_ids"]
    assert events[0].event_id == VECTOR["event_id"]
    assert events[0].event_type == VECTOR["event_type"]
    assert [e.event_type for e in events] == VECTOR["event_types"]
    assert [e.object_id for e in events] == VECTOR["object_ids"]
    assert [e.object_type for e in events] == ["subscriptions", "mandates"]
    assert events[0].occurred_at is not None
    assert events[0].occurred_at.isoformat().startswith("2018-07-05T09:13:51")
    # each event is stored as its own document
    assert json.loads(verdict.items[1].body)["id"] == "EV00BD05TB8K63"


def test_the_official_library_accepts_the_vector_and_our_signature() -> None:
    parsed = gc_webhooks.parse(VECTOR["body"], SECRET, SIGNATURE)
    assert [e.id for e in parsed] == VECTOR["event_ids"]
    assert PROVIDER.sign is not None
    sample = PROVIDER.samples.sample(OPTIONS, "payments.failed", SECRET)  # type: ignore[union-attr]
    headers = PROVIDER.sign(OPTIONS, sample.headers, sample.body, SECRET, NOW, URL)
    result = gc_webhooks.parse_with_meta(sample.body, SECRET, headers["webhook-signature"])
    assert [e.id for e in result.events] == [sample.event_id]
    assert result.webhook_id is not None


def test_a_delivery_the_library_signs_is_accepted() -> None:
    body = json.dumps(
        {
            "events": [
                {
                    "id": "EV123",
                    "created_at": "2014-08-04T12:00:00.000Z",
                    "action": "cancelled",
                    "resource_type": "mandates",
                    "links": {"mandate": "MD123", "organisation": "OR123"},
                    "details": {"origin": "bank", "cause": "bank_account_disabled"},
                }
            ],
            "meta": {"webhook_id": "WB123"},
        }
    ).encode()
    # the library's own signing function (what parse compares the header with)
    signature = hmac.new(gc_webhooks.to_bytes(SECRET), body, hashlib.sha256).hexdigest()
    gc_webhooks._verify_signature(body, SECRET, signature)  # the library accepts it
    verdict = verify({"webhook-signature": signature}, body)
    assert isinstance(verdict, Batch)
    event = verdict.items[0].event
    assert (event.event_id, event.event_type, event.object_id, event.delivery_id) == (
        "EV123",
        "mandates.cancelled",
        "MD123",
        "WB123",
    )


def test_refusals_are_498() -> None:
    refused(VECTOR["headers"], secrets=("anotherkey",))
    refused(VECTOR["headers"], BODY.replace(b"EV00BD05S5VM2T", b"EV00BD05S5VM2U"))
    refused(VECTOR["headers"], BODY + b" ")
    refused({"content-type": "application/json"})
    refused({"webhook-signature": "é" * 64})
    refused({"webhook-signature": "not hex at all"})
    refused({"webhook-signature": SIGNATURE[:-2]})
    with pytest.raises(InvalidSignatureError):
        gc_webhooks.parse(VECTOR["body"], "anotherkey", SIGNATURE)


def test_rotation_the_second_secret_matches() -> None:
    assert isinstance(verify(VECTOR["headers"], secrets=("old-secret", SECRET)), Batch)


def test_an_empty_delivery_is_answered_and_stores_nothing() -> None:
    assert PROVIDER.sign is not None
    body = b'{"events":[]}'
    headers = PROVIDER.sign(OPTIONS, {}, body, SECRET, NOW, URL)
    verdict = verify(headers, body)
    assert isinstance(verdict, Handshake) and verdict.reply.status == 200


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_the_samples_verify_with_their_own_identity(event_type: str) -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    sample = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    again = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert sample.event_id != again.event_id  # a fresh event each time
    headers = PROVIDER.sign(OPTIONS, sample.headers, sample.body, SECRET, NOW, URL)
    verdict = verify(headers, sample.body)
    assert isinstance(verdict, Batch)
    assert verdict.items[0].event.event_id == sample.event_id
    assert verdict.items[0].event.event_type == event_type
    assert verdict.items[0].event.object_id
