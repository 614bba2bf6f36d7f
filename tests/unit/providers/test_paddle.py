"""Paddle Billing's ``Paddle-Signature: ts=…;h1=…`` (hex HMAC-SHA256 of ``{ts}:{body}``, 5 s), pure:
the SDK's published vector, paddle-python-sdk's ``Verifier`` both ways, refusals, rotation, the
samples."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from paddle_billing.Notifications import PaddleSignature, Secret, Verifier

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.paddle import PROVIDER
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/paddle/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
HEADER = "paddle-signature"
OPTIONS = SourceOptions(
    name="s", kind="paddle", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


class _Request:
    """What paddle-python-sdk's Verifier reads of a request: ``headers`` and ``body`` bytes."""

    def __init__(self, headers: dict[str, str], body: bytes) -> None:
        self.headers = headers
        self.body = body


def verify(
    headers: dict[str, str],
    body: bytes = BODY,
    secrets: tuple[str, ...] = (SECRET,),
    now: float = NOW,
) -> Verdict:
    return PROVIDER.verify(OPTIONS, WebhookRequest("POST", URL, headers, body, now), secrets)


def sign(body: bytes, secret: str = SECRET, now: float = NOW) -> dict[str, str]:
    assert PROVIDER.sign is not None
    return PROVIDER.sign(OPTIONS, {"content-type": "application/json"}, body, secret, now, URL)


def test_the_tolerance_is_paddles_five_seconds() -> None:
    assert PROVIDER.tolerance == 5
    assert PROVIDER.sensitive_headers(OPTIONS) == frozenset({HEADER})


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(VECTOR["headers"])
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert event.delivery_id == VECTOR["delivery_id"]
    assert event.object_id == VECTOR["object_id"]
    assert event.occurred_at is not None
    assert event.occurred_at.isoformat() == VECTOR["occurred_at"]


def test_paddles_sdk_and_hookledger_agree_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_MODE", raising=False)
    # the vector, through the SDK (its time check off: the vector is old)
    vector_request = _Request({"Paddle-Signature": VECTOR["headers"][HEADER]}, BODY)
    assert Verifier().verify(vector_request, Secret(SECRET), verify_time_drift=False)
    # what the SDK signs, we accept
    now = 1_764_547_200
    body = b'{"event_id":"evt_1","event_type":"transaction.paid","data":{"id":"txn_1"}}'
    digest = PaddleSignature.calculate_hmac(SECRET, f"{now}:".encode() + body).hexdigest()
    event = verify({HEADER: f"ts={now};h1={digest}"}, body, now=now + 1)
    assert isinstance(event, ParsedEvent) and event.event_id == "evt_1"
    # what we sign, the SDK accepts (its own clock: sign now)
    ours = sign(body, now=time.time())
    assert Verifier().verify(_Request({"Paddle-Signature": ours[HEADER]}, body), Secret(SECRET))
    # and it refuses another key's signature
    theirs = sign(body, secret="pdl_ntfset_other", now=time.time())
    assert not Verifier().verify(
        _Request({"Paddle-Signature": theirs[HEADER]}, body), Secret(SECRET)
    )


def test_a_wrong_secret_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], secrets=("pdl_ntfset_not_this_one",))


def test_a_body_changed_by_one_byte_is_refused() -> None:
    changed = BODY.replace(b"John Doe", b"John Dof")
    assert changed != BODY
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], changed)


def test_a_missing_signature_is_refused() -> None:
    with pytest.raises(SignatureError, match="missing"):
        verify({"content-type": "application/json"})


@pytest.mark.parametrize(
    "value",
    [
        "ts=1710498758;h1=é" + "a" * 63,
        "ts=1710498758;h1=not-hex",
        "ts=1710498758;h1=",
        "h1=558bf93944dbeb4790c7a8af6cb2ea435c8ca9c8396aafc1a4e37424ac132744",
        "ts=soon;h1=558bf93944dbeb4790c7a8af6cb2ea435c8ca9c8396aafc1a4e37424ac132744",
        "garbage",
        ";;;==;",
    ],
)
def test_a_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        verify({HEADER: value})


@pytest.mark.parametrize("offset", [-6, 6, -3600])
def test_a_timestamp_outside_five_seconds_is_refused(offset: int) -> None:
    with pytest.raises(SignatureError, match="tolerance of 5 s"):
        verify(VECTOR["headers"], now=1710498758 - offset)


def test_within_five_seconds_either_way_is_accepted() -> None:
    for offset in (-5, 0, 5):
        assert isinstance(verify(VECTOR["headers"], now=1710498758 + offset), ParsedEvent)


def test_rotation_the_second_secret_matches() -> None:
    event = verify(VECTOR["headers"], secrets=("pdl_ntfset_old", SECRET))
    assert isinstance(event, ParsedEvent) and event.event_id == VECTOR["event_id"]


def test_several_h1_any_may_match() -> None:
    value = VECTOR["headers"][HEADER].replace("h1=", "h1=" + "0" * 64 + ";h1=")
    assert isinstance(verify({HEADER: value}), ParsedEvent)


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_every_sample_verifies_and_is_its_own_event(event_type: str) -> None:
    assert PROVIDER.samples is not None
    first = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    second = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert first.event_id != second.event_id
    headers = {**first.headers, **sign(first.body)}
    event = verify(headers, first.body)
    assert isinstance(event, ParsedEvent)
    assert event.event_id == first.event_id
    assert event.event_type == event_type
    assert event.occurred_at is not None
