"""The value rules that decide DIVERGED (``reconcile.compare``), table by table, no I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.base import DeliveryAttempt
from reconciler.reconcile import compare

T = datetime(2026, 12, 1, 12, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "normal"),
    [
        (None, None),
        (True, True),  # booleans stay booleans (not 1)
        (1150, Decimal("1150")),
        (11.5, Decimal("11.5")),
        ("11.50", Decimal("11.50")),
        (" PAID ", "paid"),
        ("Paid", "paid"),
        ("2026-12-01T12:30:00Z", T),
        ("2026-12-01T13:30:00+01:00", T),
        ("2026-12-01 12:30:00", T),  # naive text is UTC
        (datetime(2026, 12, 1, 12, 30), T),  # so is a naive datetime
        ("2026-13-45", "2026-13-45"),  # not a date: the text
        ({"a": 1}, {"a": 1}),
    ],
)
def test_normalize(value: Any, normal: Any) -> None:
    assert compare.normalize(value) == normal


@pytest.mark.parametrize(
    ("source", "local", "same"),
    [
        (1150, "1150", True),
        (1150, 1150.0, True),
        (1150, 1151, False),
        ("paid", "PAID", True),
        ("paid", "void", False),
        (None, None, True),
        (None, "", False),
        (True, 1, True),  # SQLite business tables store booleans as 0 and 1
        (False, 1, False),
        (int(T.timestamp()), T, True),  # epoch seconds in a date column
        (T, int(T.timestamp()), True),
        (int(T.timestamp()) + 1, T, False),
        (
            "2026-12-01T12:30:00Z",
            datetime(2026, 12, 1, 13, 30, tzinfo=timezone(timedelta(hours=1))),
            True,
        ),
    ],
)
def test_equal(source: Any, local: Any, same: bool) -> None:
    assert compare.equal(source, local) is same


def test_diff_fields_names_each_mapped_column_that_differs() -> None:
    source = {"status": "paid", "amount": {"paid": 500}, "currency": "eur"}
    row = {"status": "PAID", "amount_paid": 400, "currency": "EUR"}
    diffs = compare.diff_fields(
        source, row, {"status": "status", "amount_paid": "amount.paid", "currency": "currency"}
    )
    assert diffs == [compare.FieldDiff("amount_paid", 500, 400)]
    assert compare.diff_fields(source, {}, {"status": "status"}) == [
        compare.FieldDiff("status", "paid", None)
    ]


def ok(status: str) -> DeliveryAttempt:
    return DeliveryAttempt("1", T, status, 200)


@pytest.mark.parametrize(
    ("attempts", "has_log", "cause"),
    [
        ([], False, compare.NOT_RECEIVED),
        ([ok("OK")], False, compare.NOT_RECEIVED),  # no log to read
        ([], True, compare.NOT_RECEIVED),
        ([ok("failed")], True, compare.PROVIDER_FAILED),
        ([ok("failed"), ok("OK")], True, compare.LOST_AFTER_ACK),
    ],
)
def test_missing_cause(attempts: list[DeliveryAttempt], has_log: bool, cause: str) -> None:
    assert compare.missing_cause(attempts, has_log) == cause


@pytest.mark.parametrize(
    ("obj", "path", "amount"),
    [
        ({"amount": 1150}, "amount", 1150),
        ({"amount": "1150"}, "amount", 1150),
        ({"amount": 11.9}, "amount", 11),
        ({"amount": True}, "amount", None),
        ({"amount": "n/a"}, "amount", None),
        ({"total": {"minor": 7}}, "total.minor", 7),
        ({}, "amount", None),
        ({"amount": 5}, None, None),
    ],
)
def test_amount_of(obj: dict[str, Any], path: str | None, amount: int | None) -> None:
    assert compare.amount_of(obj, path) == amount


def test_recover_by_is_the_occurrence_plus_the_providers_retention() -> None:
    assert compare.recover_by(T, timedelta(days=30)) == T + timedelta(days=30)
    assert compare.recover_by(None, timedelta(days=30)) is None
    assert compare.recover_by(T, None) is None


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(["paid", "PAID", " Paid ", "2026-12-01T12:30:00Z", "2026-12-01 12:30:00"]),
    st.datetimes(timezones=st.sampled_from([None, UTC])),
)


@given(_scalars, _scalars)
def test_equal_is_reflexive_and_symmetric(a: Any, b: Any) -> None:
    # a value equal to itself takes the short way (same type, ==); any other pair the normalised one:
    # both ways must agree, whichever side of a pair a value is on
    assert compare.equal(a, a)
    assert compare.equal(a, b) is compare.equal(b, a)
