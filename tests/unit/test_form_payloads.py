"""Form-encoded bodies (Twilio, Slack's interactivity, GitHub's form content type) read as their
fields, pure: the payload a handler gets, the fingerprint, the masked view."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.fingerprint import differences, fingerprint
from connectors.parsing import MAX_FORM_FIELDS, decode_payload, form_fields, is_form
from reconciler.inbox.handlers import Event
from reconciler.ops.masking import Masker

FORM = "application/x-www-form-urlencoded"


def test_a_form_is_its_fields_a_repeated_field_a_list() -> None:
    body = b"MessageSid=SM1&MessageStatus=delivered&To=%2B15005550006&Tag=a&Tag=b&Empty="
    assert form_fields(body) == {
        "MessageSid": "SM1",
        "MessageStatus": "delivered",
        "To": "+15005550006",
        "Tag": ["a", "b"],
        "Empty": "",
    }


@pytest.mark.parametrize(
    ("content_type", "form"),
    [
        (FORM, True),
        ("application/x-www-form-urlencoded; charset=utf-8", True),
        ("Application/X-WWW-Form-Urlencoded", True),
        ("application/json", False),
        (None, False),
        ("", False),
    ],
)
def test_which_bodies_are_forms(content_type: str | None, form: bool) -> None:
    assert is_form(content_type) is form


def test_a_body_that_is_no_readable_form_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        decode_payload(b"a=\xff\xfe", FORM)
    with pytest.raises(ValueError):
        decode_payload(b"&".join(b"f=1" for _ in range(MAX_FORM_FIELDS + 1)), FORM)
    with pytest.raises(ValueError):
        decode_payload(b"a=1&b=2", "application/json")  # not JSON, and not said to be a form


pairs = st.lists(st.tuples(st.text(min_size=1, max_size=8), st.text(max_size=12)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(pairs)
def test_any_form_a_sender_encodes_reads_back_as_its_fields(sent: list[tuple[str, str]]) -> None:
    expected: dict[str, Any] = {}
    for name, value in sent:
        if name in expected:
            previous = expected[name]
            expected[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            expected[name] = value
    assert form_fields(urlencode(sent).encode()) == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_fields_or_a_value_error(body: bytes) -> None:
    try:
        fields = decode_payload(body, FORM)
    except ValueError:
        return
    assert isinstance(fields, dict)


def test_the_same_fields_in_another_order_are_the_same_content() -> None:
    a = b"MessageSid=SM1&MessageStatus=delivered"
    b = b"MessageStatus=delivered&MessageSid=SM1"
    assert fingerprint(a, (), FORM) == fingerprint(b, (), FORM)
    assert fingerprint(a) != fingerprint(b)  # (as bytes they differ)
    changed = b"MessageStatus=failed&MessageSid=SM1"
    assert differences(a, changed, (), FORM) == [("MessageStatus", "delivered", "failed")]


def _event(body: bytes, content_type: str | None) -> Event:
    return Event(
        id=1,
        source="twilio",
        event_id="SM1:delivered",
        event_type="message.delivered",
        object_type="message",
        object_id="SM1",
        occurred_at=datetime(2026, 12, 5, tzinfo=UTC),
        body=body,
        content_type=content_type,
        headers={},
        attempt=1,
        correlation_id="c",
    )


def test_a_handler_gets_a_form_bodys_fields_as_its_payload() -> None:
    event = _event(b"MessageSid=SM1&MessageStatus=delivered", FORM)
    assert event.payload == {"MessageSid": "SM1", "MessageStatus": "delivered"}
    assert _event(b'{"id": 1}', "application/json").payload == {"id": 1}


def test_a_form_body_is_shown_masked_field_by_field() -> None:
    body = urlencode(
        {"Body": "my card 4242 4242 4242 4242 thanks", "From": "+15005550001", "email": "a@b.c"}
    ).encode()
    shown = Masker(("email",)).mask_body(body, FORM)
    assert "4242 4242 4242 4242" not in shown and '"email": "<masked>"' in shown
    assert '"From": "+15005550001"' in shown


def test_a_payload_form_is_the_json_it_carries_and_github_reads_its_action() -> None:
    from connectors.providers.github.signature import parse_github

    document = {"action": "opened", "issue": {"id": 7}, "repository": {"id": 42}}
    body = urlencode({"payload": json.dumps(document)}).encode()
    assert decode_payload(body, FORM) == document
    parsed = parse_github(
        {"x-github-delivery": "g-1", "x-github-event": "issues", "content-type": FORM}, body
    )
    assert (parsed.event_type, parsed.object_id) == ("issues.opened", "42")
    # a form with other fields beside payload, or a payload that is no JSON document, stays a form
    assert decode_payload(b"payload=%7B%7D&x=1", FORM) == {"payload": "{}", "x": "1"}
    assert decode_payload(b"payload=hello", FORM) == {"payload": "hello"}
