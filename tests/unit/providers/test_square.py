"""Square's ``x-square-hmacsha256-signature`` (base64 HMAC-SHA256 of the notification URL followed
by the body), pure: the SDK's published vector, squareup's ``verify_signature`` both ways, the URL
that matters, refusals, rotation, the samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from square.utils.webhooks_helper import verify_signature

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.square import PROVIDER
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/square/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
HEADER = "x-square-hmacsha256-signature"
OPTIONS = SourceOptions(
    name="s", kind="square", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


def verify(
    headers: dict[str, str],
    body: bytes = BODY,
    secrets: tuple[str, ...] = (SECRET,),
    url: str = URL,
) -> Verdict:
    return PROVIDER.verify(OPTIONS, WebhookRequest("POST", url, headers, body, NOW), secrets)


def sign(body: bytes, secret: str = SECRET, url: str = URL) -> dict[str, str]:
    assert PROVIDER.sign is not None
    return PROVIDER.sign(OPTIONS, {"content-type": "application/json"}, body, secret, NOW, url)


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(VECTOR["headers"])
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert event.object_type == VECTOR["object_type"]
    assert event.object_id == VECTOR["object_id"]
    assert event.occurred_at is not None and event.occurred_at.year == 2022
    assert PROVIDER.sensitive_headers(OPTIONS) == frozenset({HEADER})


def test_squares_sdk_and_hookledger_agree_both_ways() -> None:
    # the vector, through the SDK
    assert verify_signature(
        request_body=VECTOR["body"],
        signature_header=VECTOR["headers"][HEADER],
        signature_key=SECRET,
        notification_url=URL,
    )
    # what we sign, the SDK accepts; it refuses another key's or another URL's
    body = '{"merchant_id":"M1","type":"payment.updated","event_id":"e-1","data":{"id":"p1"}}'
    url = "https://hooks.example.com/hooks/square?source=shop"
    ours = sign(body.encode(), url=url)[HEADER]
    assert verify_signature(
        request_body=body, signature_header=ours, signature_key=SECRET, notification_url=url
    )
    assert not verify_signature(
        request_body=body, signature_header=ours, signature_key="other", notification_url=url
    )
    assert not verify_signature(
        request_body=body, signature_header=ours, signature_key=SECRET, notification_url=URL
    )
    # the SDK's second published pair (an escaped body), ours agrees
    escaped = '{"data":{"type":"webhooks","id":">id<"}}'
    assert (
        sign(escaped.encode(), "signature-key", "https://webhook.site/webhooks")[HEADER]
        == "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U="
    )


def test_the_url_is_signed() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], url=URL + "/")
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], url=URL.replace("https://", "http://"))


def test_a_wrong_secret_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], secrets=("MCmhFRxGX82xMwg5FsaoQA",))


def test_a_body_changed_by_one_byte_is_refused() -> None:
    changed = BODY.replace(b"MLEFBHHSJGVHD", b"MLEFBHHSJGVHE")
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], changed)


def test_a_missing_signature_is_refused() -> None:
    with pytest.raises(SignatureError, match="missing"):
        verify({"content-type": "application/json"})
    # the legacy SHA-1 header alone is not the signature hookledger checks
    with pytest.raises(SignatureError, match="missing"):
        verify({"x-square-signature": "1z2n3DEJJiUPKcPzQo1ftvbxGdw="})


@pytest.mark.parametrize(
    "value",
    ["é" * 44, "not base64!", "1z2n3DEJJiUPKcPzQo1ftvbxGdw=", "====", "\x00\x01", "GF4Y"],
)
def test_a_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        verify({HEADER: value})


def test_rotation_the_second_secret_matches() -> None:
    event = verify(VECTOR["headers"], secrets=("old-signature-key", SECRET))
    assert isinstance(event, ParsedEvent) and event.event_id == VECTOR["event_id"]


def test_no_time_window_an_old_delivery_still_verifies() -> None:
    request = WebhookRequest("POST", URL, VECTOR["headers"], BODY, NOW + 10 * 365 * 86400)
    assert isinstance(PROVIDER.verify(OPTIONS, request, (SECRET,)), ParsedEvent)


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_every_sample_verifies_and_is_its_own_event(event_type: str) -> None:
    assert PROVIDER.samples is not None
    first = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    second = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert first.event_id != second.event_id
    url = "https://hooks.example.com/hooks/square"
    event = verify({**first.headers, **sign(first.body, url=url)}, first.body, url=url)
    assert isinstance(event, ParsedEvent)
    assert event.event_id == first.event_id
    assert event.event_type == event_type
    assert event.object_type == event_type.split(".")[0]
    assert event.occurred_at is not None
