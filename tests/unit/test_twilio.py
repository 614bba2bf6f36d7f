"""Twilio's URL signature, pure: the published vectors, twilio's own RequestValidator both ways, the
JSON-body variant, the port either way, identity by resource and status (or a JSON body's resource
SID), any form answered, TwiML for an incoming message or call and an empty 200 for a status
callback."""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twilio.request_validator import RequestValidator

from connectors.errors import RejectedDelivery
from connectors.parsing import form_fields
from connectors.providers.twilio import answer, parse_twilio, twilio_sign, verify_twilio
from connectors.webhooks import SignatureError

VECTORS = json.loads(
    (Path(__file__).parents[1] / "fixtures/providers/twilio/signature_vectors.json").read_text()
)
FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.mark.parametrize("name", ["status_callback", "library_docstring"])
def test_the_published_vectors(name: str) -> None:
    v = VECTORS[name]
    assert twilio_sign(v["url"], v["params"], v["auth_token"]) == v["signature"]
    body = urlencode(v["params"]).encode()
    verify_twilio(v["url"], {**FORM, "x-twilio-signature": v["signature"]}, body, [v["auth_token"]])


def test_twilios_validator_and_hookledger_agree_both_ways() -> None:
    token = "another_token_9876"
    url = "https://hooks.example.com/webhooks/sms?tenant=7"
    params = {"MessageSid": "SM1", "MessageStatus": "sent", "Body": "héllo & bye"}
    body = urlencode(params).encode()
    validator = RequestValidator(token)
    theirs = validator.compute_signature(url, params)
    verify_twilio(url, {**FORM, "x-twilio-signature": theirs}, body, [token])
    assert validator.validate(url, params, twilio_sign(url, params, token))
    with pytest.raises(SignatureError, match="does not match"):
        verify_twilio(url, {**FORM, "x-twilio-signature": theirs}, body, ["wrong"])


def test_the_url_is_what_is_signed_its_port_either_way_but_not_another_path() -> None:
    v = VECTORS["status_callback"]
    body = urlencode(v["params"]).encode()
    signed = {**FORM, "x-twilio-signature": v["signature"]}
    # the library accepts the default port added or not; so does this
    verify_twilio(
        "https://hooks.example.com:443/webhooks/twilio?source=sms", signed, body, [v["auth_token"]]
    )
    for other in (
        "https://hooks.example.com/webhooks/twilio?source=voice",  # another query
        "http://hooks.example.com/webhooks/twilio?source=sms",  # another scheme
        "https://127.0.0.1:8000/webhooks/twilio?source=sms",  # the receiver's own view
    ):
        with pytest.raises(SignatureError, match="public_url"):
            verify_twilio(other, signed, body, [v["auth_token"]])


def test_a_json_body_is_signed_through_its_hash_in_the_url() -> None:
    token = "json_token"
    body = b'{"id": "EZ1", "type": "com.twilio.messaging.message.delivered"}'
    url = f"https://hooks.example.com/webhooks/twilio?bodySHA256={hashlib.sha256(body).hexdigest()}"
    signature = RequestValidator(token).compute_signature(url, {})
    headers = {"content-type": "application/json", "x-twilio-signature": signature}
    verify_twilio(url, headers, body, [token])
    assert RequestValidator(token).validate(url, body.decode(), signature)
    with pytest.raises(SignatureError, match="bodySHA256"):
        verify_twilio(url, headers, body.replace(b"EZ1", b"EZ2"), [token])
    parsed = parse_twilio(headers, body)
    assert (parsed.event_id, parsed.event_type) == ("EZ1", "com.twilio.messaging.message.delivered")


def test_a_sha256_webhooks_rule_is_honoured() -> None:
    key = "shared_key_secret"
    url = "https://hooks.example.com/webhooks/twilio"
    params = {"CallSid": "CA1", "CallStatus": "completed"}
    signature = RequestValidator(key).compute_signature(url, params, "HMAC_SHA256")
    headers = {
        **FORM,
        "x-twilio-signature": signature,
        "x-twilio-webhooks-signature-settings": "key=webhooks_sharedkey_1,algorithm=HMAC_SHA256",
    }
    verify_twilio(url, headers, urlencode(params).encode(), [key])
    with pytest.raises(SignatureError, match="unknown algorithm"):
        verify_twilio(
            url,
            {**headers, "x-twilio-webhooks-signature-settings": "algorithm=HMAC_MD5"},
            urlencode(params).encode(),
            [key],
        )


@pytest.mark.parametrize(
    ("fields", "identity"),
    [
        (
            {"MessageSid": "SM1", "MessageStatus": "delivered"},
            ("SM1:delivered", "message.delivered", "message", "SM1"),
        ),
        (
            {"MessageSid": "SM2", "SmsStatus": "received", "Body": "hi"},
            ("SM2:received", "message.received", "message", "SM2"),
        ),
        (
            {"CallSid": "CA1", "CallStatus": "completed", "CallDuration": "12"},
            ("CA1:completed", "call.completed", "call", "CA1"),
        ),
    ],
)
def test_each_status_of_a_resource_is_its_own_event(
    fields: dict[str, str], identity: tuple[str, ...]
) -> None:
    parsed = parse_twilio(FORM, urlencode(fields).encode())
    assert (parsed.event_id, parsed.event_type, parsed.object_type, parsed.object_id) == identity


forms = st.dictionaries(
    st.sampled_from(["MessageSid", "MessageStatus", "CallSid", "CallStatus", "Body", "x"])
    | st.text(max_size=6),
    st.text(max_size=12),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(fields=forms, raw=st.binary(max_size=60), use_raw=st.booleans())
def test_any_signed_form_is_an_event_or_a_clear_4xx(
    fields: dict[str, str], raw: bytes, use_raw: bool
) -> None:
    url = "https://hooks.example.com/webhooks/twilio"
    body = raw if use_raw else urlencode(fields).encode()
    params: Any = {}
    with contextlib.suppress(ValueError):
        params = form_fields(body)
    headers = {**FORM, "x-twilio-signature": twilio_sign(url, params, "t")}
    try:
        verify_twilio(url, headers, body, ["t"])
        parsed = parse_twilio(headers, body)
    except RejectedDelivery as exc:
        assert 400 <= exc.status_code < 500 and exc.reason and "\n" not in exc.reason
        return
    assert parsed.event_id and parsed.object_id


def test_a_stored_callback_is_signed_afresh_for_the_url_it_is_sent_to() -> None:
    """hookledger drill --target sends stored events again: Twilio's signature must cover the
    drill's own URL."""
    from connectors.errors import UnsupportedError
    from connectors.options import ProviderKeys, SourceOptions
    from connectors.providers.twilio import PROVIDER

    assert PROVIDER.sign is not None
    options = SourceOptions(name="sms", kind="twilio", keys=ProviderKeys())
    body = urlencode({"MessageSid": "SM1", "MessageStatus": "sent"}).encode()
    target = "http://staging.internal:8000/webhooks/sms"
    headers = PROVIDER.sign(options, FORM, body, "token", 0.0, target)
    verify_twilio(target, headers, body, ["token"])
    assert RequestValidator("token").validate(
        target, {"MessageSid": "SM1", "MessageStatus": "sent"}, headers["x-twilio-signature"]
    )
    with pytest.raises(UnsupportedError, match="cannot be re-signed"):
        PROVIDER.sign(options, {"content-type": "application/json"}, b"{}", "token", 0.0, target)


@pytest.mark.parametrize(
    ("fields", "twiml"),
    [
        ({"MessageSid": "SM1", "SmsStatus": "received", "Body": "hi"}, True),  # incoming message
        (
            {"CallSid": "CA1", "CallStatus": "ringing", "Direction": "inbound"},
            True,
        ),  # incoming call
        ({"CallSid": "CA1", "CallStatus": "in-progress", "Digits": "1"}, True),  # <Gather> action
        ({"MessageSid": "SM1", "SmsStatus": "sent", "MessageStatus": "sent"}, False),
        (
            {"CallSid": "CA1", "CallStatus": "completed", "CallbackSource": "call-progress-events"},
            False,
        ),
        ({"CallSid": "CA1", "RecordingSid": "RE1", "RecordingStatus": "completed"}, False),
        ({"TranscriptionSid": "TR1", "TranscriptionStatus": "completed"}, False),
        ({"ConferenceSid": "CF1", "StatusCallbackEvent": "conference-end"}, False),
    ],
)
def test_twiml_answers_an_incoming_message_or_call_an_empty_200_a_status_callback(
    fields: dict[str, str], twiml: bool
) -> None:
    reply = answer(FORM, urlencode(fields).encode())
    assert reply.status == 200
    if twiml:
        assert reply.body == b'<?xml version="1.0" encoding="UTF-8"?><Response/>'
        assert reply.content_type == "text/xml"
    else:
        assert reply.body == b""
    assert answer({"content-type": "application/json"}, b"{}").body == b""


@pytest.mark.parametrize(
    ("document", "event_id"),
    [
        ({"sid": "XX1", "CallSid": "CA1"}, "XX1"),  # its own id first, as before
        ({"MessageSid": "SM1", "MessageStatus": "sent"}, "SM1:sent"),  # as its form is named
        ({"SmsSid": "SM2"}, "SM2"),
        ({"CallSid": "CA1"}, "CA1"),
        ({"RecordingSid": "RE1"}, "RE1"),
        ({"TranscriptionSid": "TR1"}, "TR1"),
        ({"ConferenceSid": "CF1"}, "CF1"),
    ],
)
def test_a_json_body_is_named_by_its_id_or_the_resource_sid_it_carries(
    document: dict[str, str], event_id: str
) -> None:
    assert (
        parse_twilio({"content-type": "application/json"}, json.dumps(document).encode()).event_id
        == event_id
    )


def test_a_json_body_without_any_id_is_a_clear_400() -> None:
    with pytest.raises(RejectedDelivery, match="MessageSid") as caught:
        parse_twilio({"content-type": "application/json"}, b'{"Body": "no id"}')
    assert caught.value.status_code == 400
