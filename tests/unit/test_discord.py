"""Discord's Ed25519 signature and its webhook events, pure: the published vector, PyNaCl (as
Discord's own docs use) both ways, the PING answered 204, an identity derived from the event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from connectors.errors import RejectedDelivery
from connectors.providers.discord import parse_discord, verify_discord
from connectors.webhooks import Handshake, ParsedEvent, SignatureError

VECTOR = json.loads(
    (Path(__file__).parents[1] / "fixtures/providers/discord/signature_vector.json").read_text()
)
SEED = bytes([7]) * 32
NOW = int(VECTOR["timestamp"])


def signed(body: bytes, key: SigningKey | None = None, ts: int = NOW) -> dict[str, str]:
    signature = (key or SigningKey(SEED)).sign(str(ts).encode() + body).signature.hex()
    return {"x-signature-ed25519": signature, "x-signature-timestamp": str(ts)}


def test_the_published_vector() -> None:
    assert SigningKey(SEED).verify_key.encode().hex() == VECTOR["public_key"]
    headers = {"x-signature-ed25519": VECTOR["signature"], "x-signature-timestamp": str(NOW)}
    verify_discord(headers, VECTOR["body"].encode(), VECTOR["public_key"], now=NOW, tolerance=300)


def test_pynacl_and_hookledger_agree_both_ways() -> None:
    body = b'{"version":1,"application_id":"111","type":1,"event":{"type":"ENTITLEMENT_CREATE"}}'
    headers = signed(body)
    verify_discord(headers, body, VECTOR["public_key"], now=NOW, tolerance=300)
    verify = VerifyKey(bytes.fromhex(VECTOR["public_key"]))
    verify.verify(str(NOW).encode() + body, bytes.fromhex(headers["x-signature-ed25519"]))
    other = signed(body, SigningKey(bytes([8]) * 32))
    with pytest.raises(SignatureError, match="does not match"):
        verify_discord(other, body, VECTOR["public_key"], now=NOW, tolerance=300)
    with pytest.raises(BadSignatureError):
        verify.verify(str(NOW).encode() + body, bytes.fromhex(other["x-signature-ed25519"]))


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"x-signature-timestamp": str(NOW)}, "missing header X-Signature-Ed25519"),
        ({"x-signature-ed25519": "zz", "x-signature-timestamp": str(NOW)}, "not hexadecimal"),
        ({"x-signature-ed25519": "00", "x-signature-timestamp": "later"}, "not a Unix time"),
    ],
)
def test_a_refused_request_says_why(headers: dict[str, str], reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        verify_discord(headers, b"{}", VECTOR["public_key"], now=NOW, tolerance=300)


def test_a_stale_signature_is_refused() -> None:
    body = b'{"type":0}'
    with pytest.raises(SignatureError, match="too old"):
        verify_discord(
            signed(body, ts=NOW - 600), body, VECTOR["public_key"], now=NOW, tolerance=300
        )


@given(ahead=st.integers(301, 10**9))
def test_a_signature_from_the_future_is_refused(ahead: int) -> None:
    """A validly signed request stamped ahead of now would stay replayable until the clock caught
    up: refused beyond the tolerance, as a stale one is; within it, clock skew, accepted."""
    body = b'{"type":0}'
    with pytest.raises(SignatureError, match="too new"):
        verify_discord(
            signed(body, ts=NOW + ahead), body, VECTOR["public_key"], now=NOW, tolerance=300
        )
    verify_discord(signed(body, ts=NOW + 300), body, VECTOR["public_key"], now=NOW, tolerance=300)


def test_a_ping_is_answered_204_and_is_no_event() -> None:
    verdict = parse_discord(b'{"version":1,"application_id":"111","type":0}')
    assert isinstance(verdict, Handshake) and verdict.reply.status == 204
    assert verdict.reply.body == b"" and verdict.what == "PING"


def test_an_events_identity_is_its_content_whatever_the_key_order() -> None:
    a = parse_discord(VECTOR["body"].encode())
    reordered = {
        "type": 1,
        "event": {
            "data": {},
            "timestamp": "2025-12-01T00:00:00.000000",
            "type": "APPLICATION_AUTHORIZED",
        },
        "application_id": "111",
        "version": 1,
    }
    b = parse_discord(json.dumps(reordered).encode())
    assert isinstance(a, ParsedEvent) and isinstance(b, ParsedEvent)
    assert a.event_id == b.event_id and a.event_id.startswith("discord:")
    assert a.event_type == "APPLICATION_AUTHORIZED" and a.occurred_at is not None
    later = {
        **reordered,
        "event": {**reordered["event"], "timestamp": "2025-12-01T00:00:01.000000"},
    }
    c = parse_discord(json.dumps(later).encode())
    assert isinstance(c, ParsedEvent) and c.event_id != a.event_id


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(
    document=st.fixed_dictionaries(
        {}, optional={"type": st.sampled_from([0, 1, 2, "1"]), "event": JSON, "version": JSON}
    )
    | JSON
)
def test_any_signed_body_is_a_verdict_or_a_clear_4xx(document: Any) -> None:
    body = json.dumps(document).encode()
    verify_discord(signed(body), body, VECTOR["public_key"], now=NOW, tolerance=300)
    try:
        verdict = parse_discord(body)
    except RejectedDelivery as exc:
        assert 400 <= exc.status_code < 500 and exc.reason and "\n" not in exc.reason
        return
    assert isinstance(verdict, Handshake | ParsedEvent)
