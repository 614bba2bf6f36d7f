"""Typeform's webhook signature and form responses, pure: the vector computed with the documented
scheme (Typeform publishes no library that verifies), refusals, the samples."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.providers.typeform import PROVIDER
from connectors.webhooks import Batch, ParsedEvent, SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/typeform/signature_vector.json").read_text()
)
SECRET: str = VECTOR["secret"]
NOW: int = VECTOR["now"]
URL: str = VECTOR["url"]
BODY: bytes = VECTOR["body"].encode()
SIGNATURE = "typeform-signature"
GARBAGE = ["sha256=" + "ü" * 44, "sha256=not base64!", "sha256=", "sha1=" + "0" * 40, "ü", "A" * 44]


def options() -> SourceOptions:
    return SourceOptions(
        name="s",
        kind="typeform",
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


def test_the_vector_is_the_documented_scheme() -> None:
    digest = base64.b64encode(hmac.new(SECRET.encode(), BODY, hashlib.sha256).digest()).decode()
    assert VECTOR["headers"][SIGNATURE] == "sha256=" + digest == signed()[SIGNATURE]


def test_the_response_is_read() -> None:
    event = event_of(verify(VECTOR["headers"]))
    assert event.object_id == "lT4Z3j"
    assert event.occurred_at is not None and event.occurred_at.isoformat().startswith("2018-01-18")


def test_no_time_window_applies() -> None:
    event_of(verify(VECTOR["headers"], now=NOW + 10**8))
