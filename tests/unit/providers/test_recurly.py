"""Recurly's ``recurly-signature: <timestamp ms>,<sig>[,<sig>]`` (hex HMAC-SHA256 of
``{timestamp}.{body}``), pure: the Ruby client's published vector, the documented algorithm both
ways (Recurly's Python library has no webhook verification: ``verify_signature`` of the Ruby
client, transcribed below, is the reference), refusals, the five-minute window, rotation, samples."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.recurly import PROVIDER
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/recurly/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
HEADERS: dict[str, str] = VECTOR["headers"]
STAMP, SIGNATURE = HEADERS["recurly-signature"].split(",")
OPTIONS = SourceOptions(
    name="s", kind="recurly", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


class VerificationError(Exception):
    pass


def ruby_verify_signature(
    header: str, secret: str, body: bytes, now_ms: int, tolerance: int = 5 * 60 * 1000
) -> None:
    """``Recurly::Webhooks.verify_signature`` (recurly-client-ruby ``lib/recurly/webhooks.rb``)."""
    s_timestamp, *signatures = header.split(",")
    timestamp = int(s_timestamp)
    if abs(now_ms - timestamp) > tolerance:
        raise VerificationError("out of date")
    expected = hmac.new(
        secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256
    ).hexdigest()
    if not any(hmac.compare_digest(expected, s) for s in signatures):
        raise VerificationError("No matching signatures found for payload")


def verify(
    headers: dict[str, str],
    body: bytes = BODY,
    secrets: tuple[str, ...] = (SECRET,),
    now: float = NOW,
) -> Verdict:
    return PROVIDER.verify(OPTIONS, WebhookRequest("POST", URL, headers, body, now), secrets)


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(HEADERS)
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert (event.object_type, event.object_id) == ("account", VECTOR["object_id"])
    assert event.occurred_at is not None
    assert event.occurred_at.isoformat() == VECTOR["occurred_at"]


def test_the_reference_algorithm_and_ours_agree_both_ways() -> None:
    ruby_verify_signature(HEADERS["recurly-signature"], SECRET, BODY, int(NOW * 1000))
    assert PROVIDER.sign is not None
    signed = PROVIDER.sign(OPTIONS, {"content-type": "application/json"}, BODY, SECRET, NOW, URL)
    stamp, signature = signed["recurly-signature"].split(",")
    assert stamp == str(int(NOW * 1000))
    message = f"{stamp}.".encode() + BODY
    assert signature == hmac.new(SECRET.encode(), message, hashlib.sha256).hexdigest()
    ruby_verify_signature(signed["recurly-signature"], SECRET, BODY, int(NOW * 1000))
    assert isinstance(verify(signed), ParsedEvent)


def test_several_signatures_any_may_match() -> None:
    # the Ruby client's "with multiple signatures in header" case
    header = f"{STAMP},de1ec7ab1e,{SIGNATURE}"
    assert isinstance(verify({"recurly-signature": header}), ParsedEvent)


def test_rotation_the_second_secret_matches() -> None:
    assert isinstance(verify(HEADERS, secrets=("old-key", SECRET)), ParsedEvent)


def test_the_five_minute_window_either_side() -> None:
    ms = int(STAMP) / 1000
    assert isinstance(verify(HEADERS, now=ms + 299), ParsedEvent)
    assert isinstance(verify(HEADERS, now=ms - 299), ParsedEvent)
    for now in (ms + 301, ms - 301, 1_700_000_000):
        with pytest.raises(SignatureError):
            verify(HEADERS, now=now)


@pytest.mark.parametrize(
    "header",
    [
        "",
        STAMP,
        f"{STAMP},",
        f"abc,{SIGNATURE}",  # malformed timestamp
        f"{int(STAMP) + 1000},{SIGNATURE}",  # the timestamp altered
        f"t={STAMP},v1={SIGNATURE}",  # another provider's form
        f"{STAMP},{'é' * 64}",
        f"{STAMP},zz{SIGNATURE[2:]}",
        f"{STAMP},{SIGNATURE[:-1]}",
    ],
)
def test_malformed_headers_are_401(header: str) -> None:
    with pytest.raises(SignatureError):
        verify({"recurly-signature": header} if header else {})


def test_refusals() -> None:
    for body, secrets in (
        (BODY, ("key",)),
        (b"{}", (SECRET,)),
        (BODY.replace(b"created", b"updated"), (SECRET,)),
        (BODY + b" ", (SECRET,)),
    ):
        with pytest.raises(SignatureError):
            verify(HEADERS, body, secrets)


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_the_samples_verify_with_their_own_identity(event_type: str) -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    sample = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert sample.event_id != PROVIDER.samples.sample(OPTIONS, event_type, SECRET).event_id
    headers = PROVIDER.sign(OPTIONS, sample.headers, sample.body, SECRET, NOW, URL)
    ruby_verify_signature(headers["recurly-signature"], SECRET, sample.body, int(NOW * 1000))
    event = verify(headers, sample.body)
    assert isinstance(event, ParsedEvent)
    assert (event.event_id, event.event_type) == (sample.event_id, event_type)
    assert "recurly-signature" in PROVIDER.sensitive_headers(OPTIONS)
