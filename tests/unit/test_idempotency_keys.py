"""Idempotency-Key parsing and fingerprints, pure: the draft's structured-field string and the bare
key are one key; a JSON body is compared as canonical JSON; routes pick their policy."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.idempotency.keys import (
    _KEY,
    DuplicateKeyError,
    RoutePolicy,
    canonical_body,
    fingerprint,
    media_type,
    parse_key,
    policy_for,
)


@given(st.from_regex(_KEY, fullmatch=True))
def test_a_key_quoted_as_an_sf_string_is_the_bare_key(key: str) -> None:
    quoted = '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
    assert parse_key([quoted.encode()]) == key
    if not key.startswith('"'):  # (a value that starts with a quote is read as an sf-string)
        assert parse_key([key.encode()]) == key


@given(st.binary(max_size=40))
def test_any_header_value_is_a_key_or_refused_never_an_error(raw: bytes) -> None:
    key = parse_key([raw])
    assert key is None or (_KEY.fullmatch(key) and len(key) <= 255)


def test_quoted_values_that_are_not_sf_strings_are_refused() -> None:
    for raw in (b'"', b'""', b'"abc', b'"a"b"', b'"a\\xb"', b'"a\\"'):
        assert parse_key([raw]) is None, raw


@given(
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=5),
)
def test_a_json_body_re_serialised_is_the_same_body(document: dict[str, object]) -> None:
    import json

    a = json.dumps(document).encode()
    b = json.dumps(dict(reversed(list(document.items()))), separators=(",", ":")).encode()
    assert canonical_body(a, "application/json") == canonical_body(b, "application/json")
    assert canonical_body(a, "text/plain") == a  # other bodies as their bytes
    assert canonical_body(b"{not json", "application/json") == b"{not json"


def test_the_first_matching_route_policy_wins() -> None:
    pay = RoutePolicy(required=True, retention=timedelta(days=30))
    loose = RoutePolicy(fingerprint="bytes")
    policies = [("POST /payments", pay), ("* /orders/*", loose)]
    default = RoutePolicy()
    assert policy_for(policies, default, "POST", "/payments") is pay
    assert policy_for(policies, default, "PUT", "/payments") is default
    assert policy_for(policies, default, "DELETE", "/orders/7") is loose
    assert policy_for(policies, default, "POST", "/likes") is default


@given(
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), min_size=1),
    st.data(),
)
def test_a_json_body_that_names_a_key_twice_is_refused_at_any_depth(
    document: dict[str, object], data: st.DataObject
) -> None:
    import json

    key = data.draw(st.sampled_from(sorted(document)))
    inner = json.dumps(document)[1:-1]
    repeated = "{" + inner + ", " + json.dumps(key) + ": " + json.dumps("other") + "}"
    for body in (repeated, '{"outer": ' + repeated + "}", "[" + repeated + "]"):
        with pytest.raises(DuplicateKeyError, match="more than once"):
            canonical_body(body.encode(), "application/json")
        assert canonical_body(body.encode(), "text/plain") == body.encode()  # bytes: as sent


def test_the_content_type_is_compared_by_its_media_type_case_and_its_parameters() -> None:
    assert media_type("Application/JSON ; charset=utf-8") == "application/json;charset=utf-8"
    assert media_type(None) == media_type("") == ""
    base = fingerprint("POST", "/o", b"", "application/json", b"{}")
    assert base == fingerprint("POST", "/o", b"", "APPLICATION/json", b"{}")
    assert base != fingerprint("POST", "/o", b"", "application/json; charset=latin-1", b"{}")
    assert base != fingerprint("POST", "/o", b"", "text/plain", b"{}")
