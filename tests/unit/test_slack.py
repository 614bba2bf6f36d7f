"""Slack's request signature and its requests, pure: the published vector, Slack's own SDK both
ways, the handshake, and any signed body answered with a verdict or a clear 4xx."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.signature import SignatureVerifier

from connectors.errors import RejectedDelivery
from connectors.providers.slack import parse_slack, slack_sign, verify_slack
from connectors.webhooks import Handshake, ParsedEvent, SignatureError

VECTOR = json.loads(
    (Path(__file__).parents[1] / "fixtures/providers/slack/signature_vector.json").read_text()
)
SECRET = VECTOR["signing_secret"]
NOW = 1_764_547_200


def headers(body: bytes, secret: str = SECRET, ts: int = NOW) -> dict[str, str]:
    return {
        "x-slack-request-timestamp": str(ts),
        "x-slack-signature": slack_sign(body, secret, ts),
    }


def test_the_published_vector() -> None:
    body = VECTOR["body"].encode()
    assert slack_sign(body, SECRET, int(VECTOR["timestamp"])) == VECTOR["signature"]


class _Clock:
    def now(self) -> float:
        return NOW + 1


def test_slacks_sdk_and_hookledger_agree_both_ways() -> None:
    sdk = SignatureVerifier(SECRET, clock=_Clock())
    body = b'{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}'
    # what the SDK signs, we accept
    signed = sdk.generate_signature(timestamp=str(NOW), body=body)
    assert signed is not None
    verify_slack(
        {"x-slack-request-timestamp": str(NOW), "x-slack-signature": signed},
        body,
        [SECRET],
        now=NOW + 1,
    )
    # what we sign, the SDK accepts
    assert sdk.is_valid_request(body, headers(body))
    # and neither accepts the other key's
    other = headers(body, secret="another_secret")
    assert not sdk.is_valid_request(body, other)
    with pytest.raises(SignatureError, match="does not match"):
        verify_slack(other, body, [SECRET], now=NOW)


BODY = b'{"type":"event_callback","event_id":"Ev1","event":{}}'


@pytest.mark.parametrize(
    ("sent", "reason"),
    [
        (headers(BODY, ts=NOW - 301), "too old"),
        (headers(BODY, ts=NOW + 301), "too new"),
        ({**headers(BODY), "x-slack-request-timestamp": "soon"}, "is not a Unix time"),
        ({**headers(BODY), "x-slack-signature": "v1=abc"}, "does not start with v0="),
        ({**headers(BODY), "x-slack-signature": ""}, "missing header X-Slack-Signature"),
        ({"x-slack-signature": "v0=abc"}, "missing header X-Slack-Request-Timestamp"),
    ],
)
def test_a_refused_request_says_why(sent: dict[str, str], reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        verify_slack(sent, BODY, [SECRET], now=NOW)


def test_the_url_verification_handshake_echoes_the_challenge() -> None:
    verdict = parse_slack(
        b'{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}'
    )
    assert isinstance(verdict, Handshake) and verdict.what == "url_verification"
    assert verdict.reply.status == 200 and verdict.reply.content_type == "application/json"
    assert json.loads(verdict.reply.body) == {
        "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    }


def test_an_event_callback_is_an_event_by_its_event_id() -> None:
    body = {
        "type": "event_callback",
        "event_id": "Ev08MFMKH6",
        "event_time": 1764547200,
        "event": {"type": "reaction_added", "item": {"type": "message", "channel": "C123ABC456"}},
    }
    verdict = parse_slack(json.dumps(body).encode())
    assert isinstance(verdict, ParsedEvent)
    assert (verdict.event_id, verdict.event_type, verdict.object_type, verdict.object_id) == (
        "Ev08MFMKH6",
        "reaction_added",
        "channel",
        "C123ABC456",
    )
    assert verdict.occurred_at is not None and verdict.occurred_at.timestamp() == 1764547200


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
SLACKISH = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["event_callback", "url_verification", "app_rate_limited", "x"])
        | st.text(max_size=5),
        "event_id": JSON,
        "challenge": JSON,
        "event": JSON,
        "event_time": JSON,
    },
)


@settings(max_examples=300, deadline=None)
@given(document=st.one_of(SLACKISH, JSON), raw=st.binary(max_size=40), use_raw=st.booleans())
def test_any_signed_body_is_a_verdict_or_a_clear_4xx(
    document: Any, raw: bytes, use_raw: bool
) -> None:
    body = raw if use_raw else json.dumps(document).encode()
    verify_slack(headers(body), body, [SECRET], now=NOW)
    try:
        verdict = parse_slack(body)
    except RejectedDelivery as exc:
        assert 400 <= exc.status_code < 500 and "\n" not in exc.reason and exc.reason
        return
    if isinstance(verdict, ParsedEvent):
        assert verdict.event_id and verdict.event_id.strip() == verdict.event_id
    else:
        assert isinstance(verdict, Handshake) and verdict.reply.status == 200


FORM = "application/x-www-form-urlencoded"


def test_an_interaction_is_an_event_by_its_trigger_id_acknowledged_empty() -> None:
    from urllib.parse import urlencode

    from connectors.webhooks import Received

    interaction = {
        "type": "block_actions",
        "trigger_id": "12466734323.1395872398.4ffd3f2a1",
        "channel": {"id": "C0CH4NN3L", "name": "ops"},
        "actions": [{"action_id": "approve", "action_ts": "1764547200.000100"}],
    }
    verdict = parse_slack(urlencode({"payload": json.dumps(interaction)}).encode(), FORM)
    assert isinstance(verdict, Received) and verdict.ack.body == b""
    assert (verdict.event.event_id, verdict.event.event_type, verdict.event.object_id) == (
        "12466734323.1395872398.4ffd3f2a1",
        "interactivity.block_actions",
        "C0CH4NN3L",
    )


def test_a_slash_command_is_an_event_by_its_trigger_id() -> None:
    from urllib.parse import urlencode

    from connectors.webhooks import Received

    fields = {
        "command": "/deploy",
        "text": "api production",
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        "channel_id": "C2147483705",
        "user_id": "U2147483697",
    }
    verdict = parse_slack(urlencode(fields).encode(), f"{FORM}; charset=utf-8")
    assert isinstance(verdict, Received)
    assert verdict.event.event_type == "slash_command./deploy"
    assert verdict.event.event_id == fields["trigger_id"]
    with pytest.raises(RejectedDelivery, match="trigger_id"):
        parse_slack(urlencode({"command": "/deploy"}).encode(), FORM)
