"""The receiver's steps that need no server (reconciler/inbox/intake.py), each on its own: read the
body within its bound, the items of a verdict, the answer to what was stored. Pure: no HTTP, no
database (the HTTP path runs them in tests/integration/test_receiver*.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.parsing import ParsedEvent
from connectors.webhooks import Batch, BatchItem, Received, Reply, WebhookRequest
from reconciler.inbox.intake import Intake, TooLarge, answer_of, items_of, read_body
from reconciler.inbox.schemes import SourceVerifier
from reconciler.inbox.store import IncomingEvent, RejectedRecord, Stored
from reconciler.storage.models import DeliveryOutcome
from reconciler.testkit.events import source_of

AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


async def _chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def _never() -> AsyncIterator[bytes]:
    raise AssertionError("the body was read")
    yield b""  # (an async generator)


def _read(parts: list[bytes], declared: str | None, limit: int) -> bytes:
    return asyncio.run(read_body(_chunks(parts), declared, limit))


def test_a_body_declared_too_large_is_refused_before_a_byte_is_read() -> None:
    with pytest.raises(TooLarge):
        asyncio.run(read_body(_never(), "1001", 1000))


@given(
    parts=st.lists(st.binary(max_size=300), max_size=8),
    limit=st.integers(0, 1500),
    declared=st.none() | st.sampled_from(["", "abc", "-1", "0", "5"]),
)
def test_a_streamed_body_is_whole_within_its_bound_and_refused_past_it(
    parts: list[bytes], limit: int, declared: str | None
) -> None:
    """A Content-Length that is not a number, or lies low, bounds nothing: the bytes do."""
    whole = b"".join(parts)
    if len(whole) > limit:
        with pytest.raises(TooLarge):
            _read(parts, declared, limit)
    else:
        assert _read(parts, declared, limit) == whole


def _verifier(kind: str = "stripe") -> SourceVerifier:
    return SourceVerifier(source_of(kind, "payments"), ("whsec_test",))


def _request(body: bytes = b"{}", **headers: str) -> WebhookRequest:
    given_headers = {"content-type": "application/json", "stripe-signature": "t=1,v1=abc"}
    given_headers |= headers
    return WebhookRequest("POST", "http://127.0.0.1/webhooks/payments", given_headers, body, 0.0)


def test_one_event_is_one_item_with_its_headers_masked_and_a_correlation_id() -> None:
    parsed = ParsedEvent("evt_1", event_type="invoice.paid", request_id="req_42")

    intake = items_of(_verifier(), parsed, _request(b'{"id":"evt_1"}'), AT, "10.0.0.1")

    assert isinstance(intake, Intake) and intake.ack is None
    (item,) = intake.items
    assert (item.source, item.parsed, item.body, item.remote_addr) == (
        "payments",
        parsed,
        b'{"id":"evt_1"}',
        "10.0.0.1",
    )
    assert item.headers["stripe-signature"] != "t=1,v1=abc"  # the signature is not stored
    assert item.correlation_id == "req_42"  # the provider's request id, where it gives one
    assert item.content_type == "application/json"


def test_a_received_event_keeps_the_answer_its_provider_expects() -> None:
    ack = Reply(200, b"[accepted]")

    intake = items_of(_verifier(), Received(ParsedEvent("evt_1"), ack), _request(), AT)

    assert isinstance(intake, Intake) and intake.ack == ack and len(intake.items) == 1


def test_a_batch_is_its_items_each_with_its_own_body() -> None:
    batch = Batch(
        (BatchItem(ParsedEvent("a"), b'{"n":1}'), BatchItem(ParsedEvent("b"), b'{"n":2}')),
        Reply(200, b"[accepted]"),
    )

    intake = items_of(_verifier("adyen"), batch, _request(), AT)

    assert isinstance(intake, Intake)
    assert [(i.parsed.event_id, i.body) for i in intake.items] == [
        ("a", b'{"n":1}'),
        ("b", b'{"n":2}'),
    ]


def test_one_item_that_cannot_be_stored_refuses_the_whole_delivery_naming_it() -> None:
    batch = Batch(
        (BatchItem(ParsedEvent("fine"), b"{}"), BatchItem(ParsedEvent("bad\x00id"), b"{}")),
    )

    refused = items_of(_verifier("adyen"), batch, _request(), AT, "10.0.0.1")

    assert isinstance(refused, RejectedRecord)
    assert refused.status_code == 400 and refused.reason.startswith("item 1: ")
    assert "NUL byte" in refused.reason and refused.remote_addr == "10.0.0.1"


def _item(event_id: str) -> IncomingEvent:
    return IncomingEvent("payments", ParsedEvent(event_id), b"{}", {}, AT)


def test_the_answer_names_each_outcome_and_a_conflicts_fields() -> None:
    one = Intake((_item("evt_1"),))
    conflict = Stored(DeliveryOutcome.CONFLICT, ("data.object.amount",))

    assert json.loads(answer_of(one, [Stored(DeliveryOutcome.ACCEPTED)]).body) == {
        "status": "accepted",
        "event_id": "evt_1",
    }
    assert json.loads(answer_of(one, [conflict]).body) == {
        "status": "conflict",
        "event_id": "evt_1",
        "fields": ["data.object.amount"],
    }
    two = Intake((_item("a"), _item("b")))
    stored = [Stored(DeliveryOutcome.ACCEPTED), Stored(DeliveryOutcome.DUPLICATE)]
    assert json.loads(answer_of(two, stored).body) == {
        "status": "stored",
        "events": [
            {"status": "accepted", "event_id": "a"},
            {"status": "duplicate", "event_id": "b"},
        ],
    }


def test_a_provider_that_expects_its_own_answer_gets_it_never_sniffed() -> None:
    intake = Intake((_item("a"),), Reply(200, b"[accepted]"))

    answer = answer_of(intake, [Stored(DeliveryOutcome.DUPLICATE)])

    assert (answer.status_code, answer.body) == (200, b"[accepted]")
    assert answer.headers["x-content-type-options"] == "nosniff"
