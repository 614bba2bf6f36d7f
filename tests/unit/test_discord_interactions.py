"""Discord's interactions, pure: the signature checked before anything (a PING too), PyNaCl (as
Discord's own docs use) both ways, the PING answered PONG, each other interaction acknowledged with
the deferred response Discord allows for its type, its identity the interaction id."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from connectors.errors import RejectedDelivery
from connectors.options import SourceOptions
from connectors.providers.discord.interactions import (
    PROVIDER,
    DiscordInteractionsKeys,
    parse_interaction,
)
from connectors.webhooks import Handshake, Received, SignatureError, WebhookRequest

FIXTURES = Path(__file__).parents[1] / "fixtures/providers"
VECTOR = json.loads((FIXTURES / "discord/signature_vector.json").read_text())
COMMAND = (FIXTURES / "discord_interactions/application_command.json").read_bytes()
COMPONENT = (FIXTURES / "discord_interactions/message_component.json").read_bytes()
SEED = bytes([7]) * 32
NOW = int(VECTOR["timestamp"])
PING = b'{"application_id":"1234560123453231555","id":"1313585829357699001","type":1,"version":1}'


def signed(body: bytes, key: SigningKey | None = None, ts: int = NOW) -> dict[str, str]:
    signature = (key or SigningKey(SEED)).sign(str(ts).encode() + body).signature.hex()
    return {"x-signature-ed25519": signature, "x-signature-timestamp": str(ts)}


def verify(body: bytes, headers: dict[str, str], deferred: str = "channel_message") -> Any:
    keys = DiscordInteractionsKeys(public_key=VECTOR["public_key"], deferred_response=deferred)  # type: ignore[arg-type]
    options = SourceOptions(name="bot", kind="discord_interactions", keys=keys)
    request = WebhookRequest("POST", "https://hooks.example/webhooks/bot", headers, body, NOW)
    return PROVIDER.verify(options, request, ())


def answer(verdict: Any) -> Any:
    reply = verdict.ack if isinstance(verdict, Received) else verdict.reply
    assert reply.status == 200 and reply.content_type == "application/json"
    return json.loads(reply.body)


def test_a_ping_is_answered_pong_once_its_signature_verified() -> None:
    verdict = verify(PING, signed(PING))
    assert isinstance(verdict, Handshake) and verdict.what == "PING"
    assert answer(verdict) == {"type": 1}


@pytest.mark.parametrize(
    "headers",
    [
        signed(PING, SigningKey(bytes([8]) * 32)),  # another key: Discord's deliberate test
        signed(PING.replace(b'"version":1', b'"version":2')),  # another body
        {**signed(PING), "x-signature-timestamp": str(NOW + 1)},  # another time
        {"x-signature-timestamp": str(NOW)},
        {},
    ],
)
def test_a_ping_with_a_bad_signature_is_a_401(headers: dict[str, str]) -> None:
    with pytest.raises(SignatureError) as caught:
        verify(PING, headers)
    assert caught.value.status_code == 401


def test_an_old_or_future_timestamp_is_refused_whatever_the_signature() -> None:
    with pytest.raises(SignatureError, match="too old"):
        verify(COMMAND, signed(COMMAND, ts=NOW - 301))
    with pytest.raises(SignatureError, match="too new"):
        verify(COMMAND, signed(COMMAND, ts=NOW + 301))
    assert isinstance(verify(COMMAND, signed(COMMAND, ts=NOW - 300)), Received)


def test_pynacl_and_hookledger_agree_both_ways() -> None:
    headers = signed(COMMAND)
    assert isinstance(verify(COMMAND, headers), Received)
    check = VerifyKey(bytes.fromhex(VECTOR["public_key"]))
    check.verify(str(NOW).encode() + COMMAND, bytes.fromhex(headers["x-signature-ed25519"]))
    other = signed(COMMAND, SigningKey(bytes([8]) * 32))
    with pytest.raises(SignatureError, match="does not match"):
        verify(COMMAND, other)
    with pytest.raises(BadSignatureError):
        check.verify(str(NOW).encode() + COMMAND, bytes.fromhex(other["x-signature-ed25519"]))


def test_an_application_command_is_an_event_acknowledged_deferred() -> None:
    verdict = verify(COMMAND, signed(COMMAND))
    assert isinstance(verdict, Received)
    event = verdict.event
    assert event.event_id == "1313585829357699082"  # the interaction id: a resend is a duplicate
    assert (event.event_type, event.object_type, event.object_id) == (
        "APPLICATION_COMMAND",
        "command",
        "refund",
    )
    # the snowflake's time (Discord's epoch 2015-01-01, ms in the top 42 bits)
    assert event.occurred_at == datetime(2024, 12, 3, 19, 21, 6, 963000, tzinfo=UTC)
    assert answer(verdict) == {"type": 5}  # DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE
    # DEFERRED_UPDATE_MESSAGE is only valid for components: a command stays 5 whatever is set
    assert answer(verify(COMMAND, signed(COMMAND), "update_message")) == {"type": 5}


def test_the_snowflake_time_is_discords_own_example() -> None:
    body = json.dumps({"id": "175928847299117063", "type": 2, "data": {"name": "x"}}).encode()
    verdict = parse_interaction(body)
    assert isinstance(verdict, Received)
    assert verdict.event.occurred_at == datetime(2016, 4, 30, 11, 18, 25, 796000, tzinfo=UTC)


def test_a_component_is_deferred_as_the_source_says() -> None:
    default = verify(COMPONENT, signed(COMPONENT))
    assert isinstance(default, Received) and answer(default) == {"type": 5}
    event = default.event
    assert (event.event_id, event.event_type, event.object_type, event.object_id) == (
        "1313585900000000003",
        "MESSAGE_COMPONENT",
        "component",
        "approve_refund",
    )
    assert answer(verify(COMPONENT, signed(COMPONENT), "update_message")) == {"type": 6}


@pytest.mark.parametrize(
    ("from_message", "expected"),
    [(True, 6), (False, 5)],
    ids=["from-a-component", "from-a-command"],
)
def test_a_modal_submit_is_updated_only_when_opened_from_a_message(
    from_message: bool, expected: int
) -> None:
    modal: dict[str, Any] = {"id": "1313585900000000004", "type": 5, "data": {"custom_id": "why"}}
    if from_message:
        modal["message"] = {"id": "1313585870000000002"}
    verdict = parse_interaction(json.dumps(modal).encode(), "update_message")
    assert isinstance(verdict, Received) and verdict.event.event_type == "MODAL_SUBMIT"
    assert answer(verdict) == {"type": expected}


def test_autocomplete_is_answered_with_no_choices_and_is_no_event() -> None:
    body = b'{"id":"1313585900000000005","type":4,"data":{"name":"refund","options":[]}}'
    verdict = verify(body, signed(body))
    assert isinstance(verdict, Handshake)
    assert answer(verdict) == {"type": 8, "data": {"choices": []}}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"type":2,"data":{"name":"x"}}', "missing event id"),
        (b'{"id":"abc","type":2}', "not a snowflake"),
        (b'{"id":"99999999999999999999","type":2}', "not a snowflake"),  # above 2**64
        (b'{"id":"1","type":9}', "unknown Discord interaction type 9"),
        (b'{"id":"1","type":"2"}', "is not an integer"),
        (b'{"id":"1","type":true}', "is not an integer"),
        (b"[1]", "not a JSON object"),
        (VECTOR["body"].encode(), "kind 'discord'"),  # a webhook event sent to this URL
        (b'{"version":1,"application_id":"1","type":0}', "kind 'discord'"),  # and its PING
    ],
)
def test_a_signed_body_that_is_no_interaction_is_a_clear_400(body: bytes, reason: str) -> None:
    with pytest.raises(RejectedDelivery, match=reason) as caught:
        verify(body, signed(body))
    assert caught.value.status_code == 400


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
        {},
        optional={
            "type": st.sampled_from([0, 1, 2, 3, 4, 5, 6, "2", 2.0]),
            "id": st.one_of(st.from_regex(r"\A[0-9]{1,21}\Z"), JSON),
            "data": JSON,
            "message": JSON,
            "event": JSON,
        },
    )
    | JSON,
    deferred=st.sampled_from(["channel_message", "update_message"]),
)
def test_any_signed_body_is_a_verdict_or_a_clear_4xx(document: Any, deferred: str) -> None:
    body = json.dumps(document).encode()
    try:
        verdict = verify(body, signed(body), deferred)
    except RejectedDelivery as exc:
        assert 400 <= exc.status_code < 500 and exc.reason and "\n" not in exc.reason
        return
    assert isinstance(verdict, Handshake | Received)
    assert answer(verdict)["type"] in (1, 5, 6, 8)
