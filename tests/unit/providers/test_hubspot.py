"""HubSpot's signature v3 and its batches, pure: the vector made with hubspot-api-client, the
library both ways (it signs and checks the URI it is given: HubSpot's listed escapes decoded first),
refusals, the samples, the array read as one event each."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hubspot.utils.signature import Signature

from connectors.options import SourceOptions
from connectors.providers.hubspot import PROVIDER, signed_uri
from connectors.webhooks import (
    BadPayload,
    Batch,
    Handshake,
    ParsedEvent,
    SignatureError,
    Verdict,
    WebhookRequest,
)

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/hubspot/signature_vector.json").read_text()
)
SECRET: str = VECTOR["secret"]
NOW: int = VECTOR["now"]
URL: str = VECTOR["url"]
BODY: bytes = VECTOR["body"].encode()
SIGNATURE = "x-hubspot-signature-v3"
GARBAGE = ["ü" * 44, "not base64!", "", "sha256=" + "A" * 44, "\x00\x01"]


def options() -> SourceOptions:
    return SourceOptions(
        name="s",
        kind="hubspot",
        keys=PROVIDER.keys(),
        tolerance_seconds=PROVIDER.tolerance,
        credentials={},
    )


def verify(
    headers: dict[str, str],
    body: bytes = BODY,
    secrets: tuple[str, ...] = (SECRET,),
    now: float = NOW,
    url: str = URL,
) -> Verdict:
    return PROVIDER.verify(options(), WebhookRequest("POST", url, headers, body, now), secrets)


def event_of(verdict: Verdict) -> ParsedEvent:
    if isinstance(verdict, Batch):
        assert len(verdict.items) == 1
        return verdict.items[0].event
    assert isinstance(verdict, ParsedEvent)
    return verdict


def signed(
    body: bytes = BODY, secret: str = SECRET, now: float = NOW, url: str = URL
) -> dict[str, str]:
    assert PROVIDER.sign is not None
    base = {"content-type": "application/json"}
    return {**base, **PROVIDER.sign(options(), base, body, secret, now, url)}


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = event_of(verify(VECTOR["headers"]))
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]


def test_hookledger_signs_as_the_vector_does() -> None:
    event = event_of(verify(signed()))
    assert event.event_id == VECTOR["event_id"]


def test_a_wrong_secret_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], secrets=("not-the-secret",))


def test_a_body_changed_by_one_byte_is_refused() -> None:
    changed = bytearray(BODY)
    changed[len(changed) // 2] ^= 0x01
    with pytest.raises(SignatureError):
        verify(VECTOR["headers"], body=bytes(changed))


def test_a_missing_signature_is_refused() -> None:
    headers = {k: v for k, v in VECTOR["headers"].items() if k != SIGNATURE}
    with pytest.raises(SignatureError, match="missing"):
        verify(headers)


@pytest.mark.parametrize("garbage", GARBAGE)
def test_a_garbage_signature_is_a_401(garbage: str) -> None:
    with pytest.raises(SignatureError):
        verify({**VECTOR["headers"], SIGNATURE: garbage})


def test_rotation_the_second_secret_matches() -> None:
    event = event_of(verify(VECTOR["headers"], secrets=("an-old-secret", SECRET)))
    assert event.event_id == VECTOR["event_id"]


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_every_sample_signed_by_hookledger_verifies(event_type: str) -> None:
    assert PROVIDER.samples is not None
    now = time.time()
    sample = PROVIDER.samples.sample(options(), event_type, SECRET)
    assert PROVIDER.sign is not None
    headers = {**sample.headers}
    headers.update(PROVIDER.sign(options(), sample.headers, sample.body, SECRET, now, URL))
    event = event_of(verify(headers, body=sample.body, now=now))
    assert event.event_id == sample.event_id
    assert event.event_type == event_type
    again = PROVIDER.samples.sample(options(), event_type, SECRET)
    assert again.event_id != sample.event_id  # a fresh event each call


def test_a_stale_signature_is_refused() -> None:
    old = NOW - PROVIDER.tolerance - 60
    with pytest.raises(SignatureError, match="too old"):
        verify(signed(now=old))


def test_a_signature_from_the_future_is_refused() -> None:
    with pytest.raises(SignatureError, match="too new"):
        verify(signed(now=NOW + PROVIDER.tolerance + 60))


def test_within_the_window_is_accepted() -> None:
    event_of(verify(signed(now=NOW - PROVIDER.tolerance + 5)))


def test_library_signed_is_accepted() -> None:
    stamp = str(NOW * 1000)
    signature = Signature.get_signature(
        SECRET, VECTOR["body"], "v3", signed_uri(URL), "POST", stamp
    )
    headers = {SIGNATURE: signature, "x-hubspot-request-timestamp": stamp}
    assert event_of(verify(headers)).event_id == VECTOR["event_id"]


def test_hookledger_signed_is_accepted_by_the_library() -> None:
    now = time.time()
    headers = signed(now=now)
    assert Signature.is_valid(
        signature=headers[SIGNATURE],
        client_secret=SECRET,
        request_body=VECTOR["body"],
        http_uri=signed_uri(URL),
        http_method="POST",
        signature_version="v3",
        timestamp=headers["x-hubspot-request-timestamp"],
    )
    assert not Signature.is_valid(
        signature=headers[SIGNATURE],
        client_secret="another-secret",
        request_body=VECTOR["body"],
        http_uri=signed_uri(URL),
        http_method="POST",
        signature_version="v3",
        timestamp=headers["x-hubspot-request-timestamp"],
    )


@pytest.mark.parametrize(
    ("url", "uri"),
    [
        ("https://h.example/a%3Ab%2Fc%3Fd%40e", "https://h.example/a:b/c?d@e"),
        ("https://h.example/x?q=%21%24%27%28%29%2A%2C%3B", "https://h.example/x?q=!$'()*,;"),
        ("https://h.example/x?a=1%26b%3D2", "https://h.example/x?a=1%26b%3D2"),  # kept
        ("https://h.example/x?c=%2c%3a", "https://h.example/x?c=,:"),  # either case
        ("https://h.example/x?d=%253A", "https://h.example/x?d=%253A"),  # one pass
    ],
)
def test_the_uri_is_decoded_as_hubspot_documents(url: str, uri: str) -> None:
    assert signed_uri(url) == uri


def test_the_uri_as_called_matters() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], url=URL.replace("portal=62515", "portal=62516"))


def test_every_event_of_the_array_is_its_own() -> None:
    events = json.loads(VECTOR["body"])
    second = {**events[0], "eventId": 7, "subscriptionType": "deal.creation", "objectId": 9}
    body = json.dumps([events[0], second]).encode()
    verdict = verify(signed(body=body), body=body)
    assert isinstance(verdict, Batch)
    ids = [item.event.event_id for item in verdict.items]
    assert ids == [VECTOR["event_id"], "62515:2881778:7:1764547200000"]
    assert verdict.items[1].event.object_type == "deal"
    assert json.loads(verdict.items[1].body) == second
    first = verdict.items[0].event
    assert first.occurred_at is not None and int(first.occurred_at.timestamp()) == 1764547200


def test_a_retry_keeps_its_identity() -> None:
    retried = [{**json.loads(VECTOR["body"])[0], "attemptNumber": 3}]
    body = json.dumps(retried).encode()
    assert event_of(verify(signed(body=body), body=body)).event_id == VECTOR["event_id"]
    assert "attemptNumber" in PROVIDER.fingerprint_ignore


def test_an_empty_array_is_acknowledged() -> None:
    verdict = verify(signed(body=b"[]"), body=b"[]")
    assert isinstance(verdict, Handshake) and verdict.reply.status == 200


@pytest.mark.parametrize("body", [b'{"eventId": 1}', b"[1]", b'[{"subscriptionType": "x"}]'])
def test_a_body_that_is_no_batch_is_a_400(body: bytes) -> None:
    with pytest.raises(BadPayload):
        verify(signed(body=body), body=body)
