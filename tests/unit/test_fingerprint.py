"""The content fingerprint and the field-by-field difference (pure, no I/O)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.fingerprint import PathError, differences, fingerprint, parse_path

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def test_paths_parse() -> None:
    assert parse_path("pending_webhooks") == ("pending_webhooks",)
    assert parse_path("$.data.object.status") == ("data", "object", "status")
    assert parse_path("data.items[0].price") == ("data", "items", 0, "price")
    assert parse_path("data.*.updated") == ("data", "*", "updated")
    assert parse_path("lines[*].period") == ("lines", "*", "period")


@pytest.mark.parametrize("bad", ["", "$.", "a..b", ".a", "a.", "a[x]", "a.[0]", "a]", "x" * 300])
def test_bad_paths_are_refused(bad: str) -> None:
    with pytest.raises(PathError, match="is not a JSON path"):
        parse_path(bad)


@given(st.text(max_size=40))
def test_any_path_text_parses_or_is_refused_clearly(text: str) -> None:
    try:
        parse_path(text)
    except PathError as exc:
        assert "is not a JSON path" in str(exc)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6))
def test_key_order_and_whitespace_do_not_change_it(payload: dict[str, Any]) -> None:
    compact = json.dumps(payload, separators=(",", ":")).encode()
    spaced = json.dumps(dict(reversed(list(payload.items()))), indent=2).encode()
    assert fingerprint(compact) == fingerprint(spaced)
    assert differences(compact, spaced) == []


@given(st.dictionaries(st.text(max_size=6), json_values, min_size=1, max_size=6), json_values)
def test_a_changed_value_changes_it_and_is_named(payload: dict[str, Any], new: Any) -> None:
    key = sorted(payload)[0]
    changed = {**payload, key: new}
    a, b = json.dumps(payload).encode(), json.dumps(changed).encode()
    same = json.dumps(payload[key], sort_keys=True) == json.dumps(new, sort_keys=True)
    assert (fingerprint(a) == fingerprint(b)) == same
    diffs = differences(a, b)
    assert (diffs == []) == same
    assert all(path == key or path.startswith((f"{key}.", f"{key}[")) for path, _, _ in diffs)


def test_ignored_paths_do_not_count() -> None:
    one = json.dumps({"id": "evt_1", "pending_webhooks": 2, "data": {"s": "paid"}}).encode()
    two = json.dumps({"id": "evt_1", "pending_webhooks": 0, "data": {"s": "paid"}}).encode()
    ignore = (parse_path("pending_webhooks"),)
    assert fingerprint(one) != fingerprint(two)
    assert fingerprint(one, ignore) == fingerprint(two, ignore)
    assert differences(one, two) == [("pending_webhooks", 2, 0)]
    assert differences(one, two, ignore) == []


def test_wildcards_and_indexes() -> None:
    one = json.dumps({"lines": [{"at": 1, "v": "a"}, {"at": 2, "v": "b"}]}).encode()
    two = json.dumps({"lines": [{"at": 9, "v": "a"}, {"at": 8, "v": "c"}]}).encode()
    assert differences(one, two, (parse_path("lines[*].at"),)) == [("lines[1].v", "b", "c")]
    assert differences(one, two, (parse_path("lines[0].at"),)) == [
        ("lines[1].at", 2, 8),
        ("lines[1].v", "b", "c"),
    ]


def test_a_field_on_one_side_only_and_type_changes() -> None:
    one = json.dumps({"a": 1, "b": True}).encode()
    two = json.dumps({"a": 1.0, "c": "new", "b": 1}).encode()
    assert differences(one, two) == [("a", 1, 1.0), ("b", True, 1), ("c", None, "new")]


def test_bodies_that_are_not_json_differ_as_a_whole() -> None:
    assert fingerprint(b"a=1") != fingerprint(b"a=2")
    assert differences(b"a=1", b"a=2") == [("", "a=1", "a=2")]
    assert differences(b"\xff", b"{}")[0][0] == ""
