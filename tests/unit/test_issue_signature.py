"""The issues' pure core: an error's signature strips the values it carries, and any text gives a
bounded, stable group key."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reconciler.issues.signature import (
    NO_ERROR,
    SIGNATURE_MAX,
    SUBJECT_MAX,
    group_key,
    signature,
)
from reconciler.states import IssueKind


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ("ledger API answered 503 for evt_1NxYz2", "ledger API answered <n> for <n>"),
        ("no customer cus_NffrFeUfNVbHib", "no customer <id>"),
        ("KeyError: 'amount_due'", "KeyError: <str>"),
        ('unknown plan "gold plus"', "unknown plan <str>"),
        ("can't reach db", "can't reach db"),  # an apostrophe opens no quoted value
        ("bounce from jo.doe+x@example.co.uk", "bounce from <email>"),
        ("order 0b9e6f6e-3c0e-4a51-9a53-0f5f0d9a1c11 gone", "order <uuid> gone"),
        ("pointer 0xDEADBEEF freed", "pointer <hex> freed"),
        ("timeout after 30.5s\n\n   retrying", "timeout after <n> retrying"),
        ("gid://shopify/Order/42 missing", "<n> missing"),
        ("max_attempts exceeded", "max_attempts exceeded"),  # snake_case words stay words
        (None, NO_ERROR),
        ("   \n", NO_ERROR),
    ],
)
def test_signature_strips_values_and_keeps_words(error: str | None, expected: str) -> None:
    assert signature(error) == expected


def test_the_signature_is_bounded() -> None:
    assert len(signature("word " * 10_000)) <= SIGNATURE_MAX
    assert signature(str(uuid.uuid4()).upper()) == "<uuid>"


def test_the_key_names_kind_source_and_type() -> None:
    key = group_key(IssueKind.DEAD_EVENT, "stripe", None, "boom 42")
    assert (key.kind, key.source, key.type, key.signature) == (
        IssueKind.DEAD_EVENT,
        "stripe",
        "",
        "boom <n>",
    )
    assert group_key(IssueKind.DEAD_EVENT, "stripe", "a", "x") != group_key(
        IssueKind.DEAD_EVENT, "stripe", "b", "x"
    )
    assert group_key(IssueKind.DEAD_EVENT, "s", "t", "x") != group_key(
        IssueKind.OUTBOX_FAILURE, "s", "t", "x"
    )


# Words of an error's fixed text: letters only, so that a value never runs into them.
WORDS = st.lists(st.from_regex(r"[A-Za-z]{1,12}", fullmatch=True), min_size=1, max_size=6).map(
    " ".join
)
QUOTED_TEXT = st.text(
    alphabet=st.characters(blacklist_characters="'\"`\r\n", blacklist_categories=("Cs",)),
    max_size=40,
)
VALUES = st.one_of(
    st.integers(min_value=-(10**12), max_value=10**12).map(str),
    st.floats(min_value=0, max_value=1e9, allow_nan=False).map(lambda f: f"{f:.2f}"),
    st.uuids().map(str),
    st.from_regex(r"(evt|cus|in|ch|pi)_[A-Za-z]{0,6}[0-9][A-Za-z0-9]{4,20}", fullmatch=True),
    st.from_regex(r"[a-z]{2,6}_[A-Z][A-Za-z0-9]{9,20}", fullmatch=True),
    st.from_regex(r"[a-z][a-z0-9.]{0,10}@[a-z]{1,10}\.(com|org|io)", fullmatch=True),
    st.from_regex(r"0x[0-9a-f]{1,16}", fullmatch=True),
    QUOTED_TEXT.map(lambda t: f"'{t}'"),
    QUOTED_TEXT.map(lambda t: f'"{t}"'),
)


def _kind_of(value: str) -> str:
    """The class of placeholder a value becomes (two values of one class must match)."""
    return signature(f"x {value} y")


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(WORDS, min_size=2, max_size=4),
    slots=st.lists(st.tuples(VALUES, VALUES), min_size=1, max_size=3),
)
def test_errors_differing_only_in_values_group_together(
    words: list[str], slots: list[tuple[str, str]]
) -> None:
    # each slot holds two values of one class (both ids, both quoted, ...): the errors group together
    pairs = [(a, b) for a, b in slots if _kind_of(a) == _kind_of(b)]
    one = [words[0]]
    two = [words[0]]
    for i, (a, b) in enumerate(pairs):
        tail = words[(i + 1) % len(words)]
        one += [a, tail]
        two += [b, tail]
    assert signature(" ".join(one)) == signature(" ".join(two))


@settings(max_examples=300, deadline=None)
@given(words=WORDS, value=VALUES)
def test_every_value_is_replaced(words: str, value: str) -> None:
    assert signature(f"{words} {value}") != signature(words)
    assert value not in signature(f"{words} {value}")


@settings(max_examples=500, deadline=None)
@given(error=st.one_of(st.none(), st.text(max_size=5000)), source=st.text(), type_=st.text())
@example(error="'" * 3000, source="s" * 1000, type_="")
@example(error="\x00\ud7ff" + "9" * 5000, source="", type_=None)  # type: ignore[arg-type]
def test_any_text_gives_a_bounded_stable_key(
    error: str | None, source: str, type_: str | None
) -> None:
    key = group_key(IssueKind.DISCREPANCY, source, type_, error)
    assert key == group_key(IssueKind.DISCREPANCY, source, type_, error)
    assert 0 < len(key.signature) <= SIGNATURE_MAX
    assert len(key.source) <= SUBJECT_MAX and len(key.type) <= SUBJECT_MAX
