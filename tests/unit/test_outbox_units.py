"""The outgoing side's pure parts: a message's checks, its key, what a publisher sends (signature
cross-checked with the Standard Webhooks library), how an answer is classified, the idempotency
key and fingerprint, and the [outbox] configuration. No database, no network."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
import standardwebhooks
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.config import parse_settings
from reconciler.errors import ConfigError
from reconciler.idempotency.middleware import fingerprint, parse_key
from reconciler.outbox.request import TargetAuth, request_headers
from reconciler.outbox.writer import (
    MAX_KEY,
    InvalidMessage,
    Outbox,
    encode_payload,
    event_key,
    message,
)
from reconciler.outgoing import post
from reconciler.states import ErrorClass

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
OLD_SECRET = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"


# -- messages -----------------------------------------------------------------------------------


def test_a_handlers_key_is_the_same_for_every_run_of_its_event() -> None:
    assert event_key("stripe", "evt_1", "crm") == "stripe:evt_1:crm"
    long_id = "e" * 300
    key = event_key("stripe", long_id, "crm")
    assert len(key) <= MAX_KEY and key == event_key("stripe", long_id, "crm")
    assert key != event_key("stripe", long_id + "x", "crm")
    # an event id that is not plain ASCII cannot be a header value as it is: hashed, still stable
    accented = event_key("shopify", "commande-é", "crm")
    assert accented.isascii() and accented == event_key("shopify", "commande-é", "crm")


@pytest.mark.parametrize(
    "payload, body, content_type",
    [
        ({"b": 1, "a": "é"}, '{"b":1,"a":"é"}'.encode(), "application/json"),
        ([1, 2], b"[1,2]", "application/json"),
        ("hi", b"hi", "text/plain; charset=utf-8"),
        (b"\x00raw", b"\x00raw", "application/octet-stream"),
    ],
)
def test_payloads_are_encoded_once_and_sent_as_stored(
    payload: Any, body: bytes, content_type: str
) -> None:
    assert encode_payload(payload) == (body, content_type)


def test_a_content_type_header_overrides_the_default() -> None:
    msg = message("crm", "<x/>", key="k", headers={"Content-Type": "application/xml"})
    assert (msg.content_type, msg.headers) == ("application/xml", {})


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"target": "crm", "payload": {}}, "key is required outside a handler"),
        ({"target": "", "payload": {}, "key": "k"}, "is not a target name"),
        ({"target": "crm", "payload": {1: object()}, "key": "k"}, "not JSON-serialisable"),
        ({"target": "crm", "payload": 5, "key": "k"}, "must be a dict, a list, str or bytes"),
        ({"target": "crm", "payload": {}, "key": " "}, "must be 1-255 characters"),
        ({"target": "crm", "payload": {}, "key": 5}, "key must be a string"),
        ({"target": "crm", "payload": {}, "key": "k", "headers": {"A B": "x"}}, "is not a token"),
        (
            {"target": "crm", "payload": {}, "key": "k", "headers": {"Host": "x"}},
            "set by the publisher",
        ),
        ({"target": "crm", "payload": {}, "key": "k", "headers": {"A": "1", "a": "2"}}, "twice"),
        ({"target": "crm", "payload": {}, "key": "k", "headers": {"A": 1}}, "must be a string"),
        (
            {"target": "crm", "payload": "x" * 20, "key": "k", "max_payload_bytes": 10},
            "over [outbox]",
        ),
    ],
)
def test_each_bad_argument_is_named(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(InvalidMessage, match=error.replace("[", r"\[")):
        message(kwargs.pop("target"), kwargs.pop("payload"), **kwargs)


def test_an_unknown_target_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match=r"'mailer' is not configured .*configured: crm"):
        message("mailer", {}, key="k", targets=["crm"])


keys = st.one_of(st.none(), st.text(max_size=300), st.integers())
header_maps = st.one_of(
    st.none(),
    st.dictionaries(
        st.text(max_size=20), st.one_of(st.text(max_size=50), st.integers()), max_size=5
    ),
)
json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    target=st.text(max_size=70),
    payload=st.one_of(json_like, st.binary(max_size=50), st.text(max_size=50)),
    key=keys,
    headers=header_maps,
    correlation_id=st.one_of(st.none(), st.text(max_size=80)),
)
def test_any_argument_is_taken_or_refused_with_a_clear_error(
    target: str, payload: Any, key: Any, headers: Any, correlation_id: str | None
) -> None:
    try:
        msg = message(
            target,
            payload,
            key=key,
            headers=headers,
            correlation_id=correlation_id,
            source="stripe",
            event_id="evt_1",
        )
    except (InvalidMessage, ConfigError) as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    # what is accepted can be stored and sent as it is
    assert 1 <= len(msg.key) <= MAX_KEY and msg.key.isprintable() and msg.key.isascii()
    assert all(k.isascii() and "\r" not in v and "\n" not in v for k, v in msg.headers.items())
    assert len(msg.correlation_id) <= 64


def test_a_handler_may_not_send_two_payloads_under_one_key() -> None:
    written: list[Any] = []
    outbox = Outbox(
        lambda m: written.append(m) or True,
        source="stripe",
        event_id="evt_1",
        correlation_id="c1",
        object_key="stripe:invoice:in_1",
        targets=["crm", "mailer"],
    )
    assert outbox.add("crm", {"a": 1}) == "stripe:evt_1:crm"
    assert outbox.add("crm", {"a": 1}) == "stripe:evt_1:crm"  # the same message again: harmless
    assert outbox.add("mailer", {"a": 1}) == "stripe:evt_1:mailer"
    assert outbox.add("crm", {"b": 1}, key="second") == "second"
    with pytest.raises(InvalidMessage, match="give it a key of its own"):
        outbox.add("crm", {"a": 2})
    assert [m.object_key for m in written] == ["stripe:invoice:in_1"] * 4
    assert {m.correlation_id for m in written} == {"c1"}


# -- what is sent --------------------------------------------------------------------------------


def _headers(
    auth: TargetAuth, body: bytes = b'{"a":1}', timestamp: int = 1_700_000_000
) -> dict[str, str]:
    return request_headers(
        key="stripe:evt_1:crm",
        correlation_id="req_1",
        content_type="application/json",
        headers={"X-Api-Version": "2"},
        body=body,
        attempt=3,
        auth=auth,
        timestamp=timestamp,
    )


def test_the_signature_verifies_with_the_reference_library_during_a_rotation() -> None:
    body = b'{"a":1}'
    headers = _headers(TargetAuth((SECRET, OLD_SECRET)), body, int(time.time()))
    assert headers["webhook-id"] == headers["Idempotency-Key"] == "stripe:evt_1:crm"
    assert len(headers["webhook-signature"].split()) == 2
    for secret in (SECRET, OLD_SECRET):  # a receiver on either secret accepts it
        assert standardwebhooks.Webhook(secret).verify(body, headers) == {"a": 1}


def test_unsigned_targets_get_no_signature_and_a_token_when_configured() -> None:
    headers = _headers(TargetAuth((), "tok_123"))
    assert "webhook-signature" not in headers and headers["Authorization"] == "Bearer tok_123"
    assert (headers["X-Hookledger-Attempt"], headers["X-Api-Version"]) == ("3", "2")
    assert "tok_123" not in repr(TargetAuth((), "tok_123"))


# -- answers ---------------------------------------------------------------------------------------


def _answer(handler: Any) -> Any:
    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        return post(client, "http://crm.test/in", b"{}", {}, timeout=1.0)


@pytest.mark.parametrize(
    "status, headers, expected, retry_after",
    [
        (202, {}, None, None),
        (503, {"Retry-After": "30"}, ErrorClass.TRANSIENT, 30.0),
        (429, {}, ErrorClass.TRANSIENT, None),
        (408, {}, ErrorClass.TRANSIENT, None),
        (409, {}, ErrorClass.PERMANENT, None),
        (301, {"Location": "/elsewhere"}, ErrorClass.PERMANENT, None),
        (422, {"Retry-After": "30"}, ErrorClass.PERMANENT, None),
    ],
)
def test_answers_are_classified(
    status: int, headers: dict[str, str], expected: ErrorClass | None, retry_after: float | None
) -> None:
    answer = _answer(lambda request: httpx.Response(status, headers=headers, text="why\nnot"))
    assert (answer.status_code, answer.error_class, answer.retry_after) == (
        status,
        expected,
        retry_after,
    )
    if expected is not None:
        assert answer.message == f"http://crm.test/in answered HTTP {status}: why not"


@pytest.mark.parametrize(
    "exc, expected",
    [
        (httpx.ConnectError("refused"), ErrorClass.TRANSIENT),
        (httpx.ConnectTimeout("slow"), ErrorClass.TRANSIENT),
        (httpx.WriteTimeout("slow"), ErrorClass.TRANSIENT),
        (httpx.ReadTimeout("no answer"), ErrorClass.AMBIGUOUS),
        (httpx.RemoteProtocolError("hung up"), ErrorClass.AMBIGUOUS),
        (httpx.ReadError("reset"), ErrorClass.AMBIGUOUS),
    ],
)
def test_transport_faults_are_classified(exc: Exception, expected: ErrorClass) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise exc

    answer = _answer(fail)
    assert (answer.status_code, answer.error_class) == (None, expected)
    assert answer.message.startswith("http://crm.test/in")


# -- idempotency keys of the team's API -------------------------------------------------------------


def test_usable_keys() -> None:
    assert parse_key([b"  order-1  "]) == "order-1"
    assert parse_key([b"a b"]) == "a b"
    assert parse_key([b"x" * 255]) == "x" * 255
    for bad in ([], [b"a", b"a"], [b""], [b"x" * 256], [b"a\x00"], ["é".encode("latin-1")]):
        assert parse_key(bad) is None


@given(st.lists(st.binary(max_size=300), max_size=3))
def test_any_header_value_is_a_key_or_refused(values: list[bytes]) -> None:
    key = parse_key(values)
    if key is not None:
        assert 1 <= len(key) <= 255 and key.isascii() and key.isprintable() and key == key.strip()


def test_a_fingerprint_tells_method_path_query_content_type_and_body_apart() -> None:
    json_type = "application/json"
    base = fingerprint("POST", "/orders", b"", json_type, b"{}")
    variants = [
        fingerprint("PUT", "/orders", b"", json_type, b"{}"),
        fingerprint("POST", "/orders/", b"", json_type, b"{}"),
        fingerprint("POST", "/orders", b"a=1", json_type, b"{}"),
        fingerprint("POST", "/orders", b"", json_type, b"{} "),
        fingerprint("POST", "/order", b"s", json_type, b"{}"),  # no ambiguity at the seams
        fingerprint("POST", "/orders", b"", "text/plain", b"{}"),
        fingerprint("POST", "/orders", b"", None, b"{}"),
    ]
    assert base == fingerprint("POST", "/orders", b"", "Application/JSON", b"{}")
    assert len({base, *variants}) == 8


# -- configuration -------------------------------------------------------------------------------


def test_targets_are_checked_with_file_table_and_key() -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings(
            {"outbox": {"targets": [{"name": "crm", "url": "ftp://x", "timeout": 3}]}}, "c.toml"
        )
    lines = str(info.value).splitlines()
    assert (
        "c.toml: table [outbox][targets][0] (name 'crm'), key 'url': Value error, 'ftp://x' is not an http:// or https:// URL"
        in lines
    )
    assert "c.toml: table [outbox][targets][0] (name 'crm'), key 'timeout': unknown key" in lines
    with pytest.raises(ConfigError, match="must be shorter than \\[outbox\\] lease_seconds"):
        parse_settings(
            {"outbox": {"lease_seconds": 5, "targets": [{"name": "crm", "url": "http://x"}]}}, "c"
        )


target_values = st.one_of(
    st.text(max_size=30),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "name",
                "url",
                "timeout_seconds",
                "max_attempts",
                "signing_secret_env",
                "order_by_object",
                "extra",
            ]
        ),
        target_values,
    ),
    st.dictionaries(
        st.sampled_from(["concurrency", "lease_seconds", "max_payload_bytes"]), target_values
    ),
)
def test_any_outbox_table_loads_or_is_refused_by_key(
    target: dict[str, Any], table: dict[str, Any]
) -> None:
    data = {"outbox": {**table, "targets": [target]}}
    try:
        settings_ = parse_settings(data, "c.toml")
    except ConfigError as exc:
        assert all(line.startswith("c.toml: table ") for line in str(exc).splitlines())
        return
    [loaded] = settings_.outbox.targets
    assert (
        loaded.url.startswith(("http://", "https://"))
        and loaded.timeout_seconds < settings_.outbox.lease_seconds
    )
    assert json.dumps(settings_.outbox.model_dump())  # plain values throughout
