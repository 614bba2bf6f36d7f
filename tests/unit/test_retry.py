"""The one retry policy (``connectors.retry``) and the worker's classification of failures
(``reconciler.inbox.retry``), no I/O."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.retry import full_jitter, parse_retry_after, transient_status
from reconciler.errors import PermanentError, TransientError
from reconciler.inbox.retry import (
    Failure,
    backoff_delay,
    classify_exception,
    classify_status,
    failure_of,
)
from reconciler.states import ErrorClass, EventStatus


def test_backoff_is_exponential_with_full_jitter() -> None:
    rng = random.Random(1)
    samples = [backoff_delay(4, 2.0, 3600.0, rng) for _ in range(2000)]
    assert min(samples) >= 0 and max(samples) <= 16.0
    assert 6.0 < sum(samples) / len(samples) < 10.0  # uniform(0, 16) has mean 8
    assert max(backoff_delay(30, 2.0, 60.0, rng) for _ in range(200)) <= 60.0
    assert backoff_delay is full_jitter  # the worker and the HTTP client share it


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7", 7.0),
        (" 2.5 ", 2.5),
        ("-3", 0.0),
        (format_datetime(datetime(2026, 12, 1, 12, 0, 30, tzinfo=UTC), usegmt=True), 30.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # in the past: at once
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_delta_seconds_or_an_http_date(
    value: str | None, seconds: float | None
) -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp()
    assert parse_retry_after(value, now) == seconds


@pytest.mark.parametrize(
    ("status", "transient"),
    [
        (408, True),
        (429, True),
        (500, True),
        (503, True),
        (301, False),
        (400, False),
        (404, False),
        (422, False),
    ],
)
def test_which_http_answers_are_worth_another_attempt(status: int, transient: bool) -> None:
    assert transient_status(status) is transient
    assert classify_status(status) is (ErrorClass.TRANSIENT if transient else ErrorClass.PERMANENT)


def test_classification_of_failures() -> None:
    assert classify_status(204) is None
    assert classify_exception(TransientError()) is ErrorClass.TRANSIENT
    assert classify_exception(httpx.ConnectError("x")) is ErrorClass.TRANSIENT
    assert classify_exception(PermanentError()) is ErrorClass.PERMANENT
    assert classify_exception(KeyError("amount")) is ErrorClass.PERMANENT
    from sqlalchemy.exc import DataError

    assert (
        classify_exception(DataError("INSERT", {}, Exception("out of range")))
        is ErrorClass.PERMANENT
    )
    assert classify_exception(RuntimeError("surprise")) is ErrorClass.TRANSIENT
    assert parse_retry_after("7", 1000.0) == 7.0
    assert parse_retry_after("soon", 1000.0) is None


def test_sent_without_an_answer_is_ambiguous() -> None:
    import httpx

    from reconciler.errors import AmbiguousError
    from reconciler.inbox.retry import classify_exception
    from reconciler.storage.models import ErrorClass

    request = httpx.Request("POST", "http://127.0.0.1/x")
    for exc in (
        AmbiguousError("sent"),
        httpx.ReadTimeout("t", request=request),
        httpx.ReadError("reset", request=request),
        httpx.RemoteProtocolError("disconnected", request=request),
    ):
        assert classify_exception(exc) is ErrorClass.AMBIGUOUS, exc
    for exc in (
        httpx.ConnectTimeout("t", request=request),
        httpx.ConnectError("refused", request=request),
        httpx.WriteTimeout("t", request=request),
    ):
        assert classify_exception(exc) is ErrorClass.TRANSIENT, exc


def test_a_verify_answer_is_read_as_a_verdict() -> None:
    from reconciler.inbox.handlers import Verdict, verdict_of

    assert [verdict_of(v) for v in (Verdict.DONE, True, "done")] == [Verdict.DONE] * 3
    assert [verdict_of(v) for v in (Verdict.NOT_DONE, False, "not_done")] == [Verdict.NOT_DONE] * 3
    assert [verdict_of(v) for v in (None, "maybe", 1, Verdict.UNKNOWN)] == [Verdict.UNKNOWN] * 4


NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


def failed(exc: BaseException, attempt: int, **kw: object) -> Failure:
    options: dict[str, object] = {
        "max_attempts": 5,
        "backoff_base": 2.0,
        "backoff_max": 60.0,
        "now": NOW,
        "rng": random.Random(3),
        **kw,
    }
    return failure_of(exc, attempt, **options)  # type: ignore[arg-type]


def test_a_transient_failure_is_retried_within_the_backoff_and_a_permanent_one_is_dead() -> None:
    retried = failed(TransientError("upstream 503"), 2)
    assert retried.status == EventStatus.FAILED and retried.error_class == ErrorClass.TRANSIENT
    assert retried.next_attempt_at is not None
    assert NOW <= retried.next_attempt_at <= NOW + timedelta(seconds=4)
    dead = failed(PermanentError("no such customer"), 1)
    assert (dead.status, dead.next_attempt_at) == (EventStatus.DEAD, None)


def test_the_last_allowed_attempt_and_a_forced_end_are_dead_whatever_the_class() -> None:
    assert failed(TransientError("again"), 5).status == EventStatus.DEAD
    assert failed(TransientError("again"), 1, force_dead=True).status == EventStatus.DEAD


def test_a_retry_after_longer_than_the_backoff_is_honoured() -> None:
    exc = TransientError("rate limited")
    exc.retry_after = 120  # type: ignore[attr-defined]
    assert failed(exc, 1).next_attempt_at == NOW + timedelta(seconds=120)


@given(
    message=st.text(max_size=200),
    attempt=st.integers(1, 10),
    kind=st.sampled_from([ValueError, TransientError, RuntimeError, PermanentError, KeyError]),
)
def test_the_stored_message_is_bounded_and_never_holds_a_card_number(
    message: str, attempt: int, kind: type[Exception]
) -> None:
    got = failed(kind(f"{message} card 4242 4242 4242 4242"), attempt)
    assert "4242 4242 4242 4242" not in got.message and len(got.message) <= 8000
    assert (got.status == EventStatus.DEAD) == (
        attempt >= 5 or got.error_class == ErrorClass.PERMANENT
    )


def test_an_attempt_that_never_came_back_is_transient_until_the_hangs_make_it_dead_as_hung() -> (
    None
):
    from reconciler.errors import HandlerTimeout

    timeout = HandlerTimeout("handler_timeout: the attempt ran past 120 s")
    retried = failed(timeout, 1)
    assert retried.status is EventStatus.FAILED and retried.error_class is ErrorClass.TRANSIENT
    assert retried.message.startswith("HandlerTimeout: handler_timeout")
    assert "Traceback" not in retried.message  # a TransientError: no traceback kept
    dead = failed(timeout, 1, hung=True)  # max_hangs reached, even on the first attempt
    assert dead.status is EventStatus.DEAD and dead.error_class is ErrorClass.HUNG
    assert dead.next_attempt_at is None


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("no such plan"),
        json.JSONDecodeError("Expecting value", "{", 1),  # a ValueError: still the handler's data
        KeyError("amount"),
        TypeError("unsupported operand"),
        IndexError("list index out of range"),  # a LookupError
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_the_data_errors_docs_handlers_md_names_dead_letter_on_the_first_attempt(
    exc: BaseException,
) -> None:
    """docs/handlers.md: ValueError, KeyError, TypeError and LookupError are permanent: the first
    attempt is the last, not five attempts over minutes."""
    assert classify_exception(exc) is ErrorClass.PERMANENT
    got = failed(exc, 1)
    assert (got.status, got.error_class, got.next_attempt_at) == (
        EventStatus.DEAD,
        ErrorClass.PERMANENT,
        None,
    )
