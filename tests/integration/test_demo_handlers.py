"""The demo application's handlers (reconciler/demo/handlers.py), tested as docs/handlers.md tells a
handler author to test theirs: events built with ``hookledger.testing.event_of`` and delivered by
the ``hookledger_deliver`` fixture once, twice, newest first, shuffled and replayed, on SQLite and PostgreSQL.

Every way must reach the same business state, except the one fault the demo plants on purpose: a
paid invoice's ledger credit is appended, so an event applied again credits again (the drill's
finding); the tests say so where they count credits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from hookledger import Event, PermanentError
from hookledger.testing import Deliver, Deliveries, HandlerFailed, Status, event_of, sample_payload
from reconciler.demo import handlers
from reconciler.demo.business import fulfilments, invoices, ledger, metadata, orders, sms
from reconciler.inbox.handlers import HandlerRegistry

INVOICE = "in_demo_1"
CREATED = 1_796_000_000


@pytest.fixture
def faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[str]]]:
    """The demo's planted faults (its faults.json), empty unless a test plants some."""
    planted: dict[str, list[str]] = {"transient": [], "permanent": [], "ambiguous": []}
    monkeypatch.setenv("HOOKLEDGER_DEMO_DIR", str(tmp_path))
    handlers.reset()
    yield planted
    handlers.reset()


def plant(tmp_path: Path, planted: dict[str, list[str]]) -> None:
    (tmp_path / "faults.json").write_text(json.dumps(planted))
    handlers.reset()


@pytest.fixture
def hookledger_business(engine: Engine, faults: Any) -> Iterator[Engine]:
    """The demo's business tables, in the inbox's database (SQLite and PostgreSQL)."""
    metadata.drop_all(engine)
    metadata.create_all(engine)
    yield engine
    metadata.drop_all(engine)


@pytest.fixture
def hookledger_handlers() -> HandlerRegistry:
    return handlers.registry()


def invoice_event(step: str, status: str, seconds: int, amount: int = 4200) -> Event:
    """A Stripe event of the invoice's lifecycle, ``seconds`` after it began."""
    document = sample_payload("stripe", "invoice.paid")
    document |= {"id": f"evt_{step}_{INVOICE}", "type": step, "created": CREATED + seconds}
    document["data"]["object"] |= {
        "id": INVOICE,
        "status": status,
        "amount_paid": amount,
        "customer": "cus_demo",
    }
    return event_of("stripe", payload=document)


def lifecycle() -> list[Event]:
    return [
        invoice_event("invoice.created", "draft", 0, amount=0),
        invoice_event("invoice.finalized", "open", 60, amount=0),
        invoice_event("invoice.paid", "paid", 3600),
    ]


def rows(engine: Engine, table: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(table))]


def test_an_invoices_lifecycle_ends_paid_whatever_the_order_and_its_receipt_goes_once(
    hookledger_deliver: Deliver, hookledger_business: Engine
) -> None:
    applied = hookledger_deliver(*lifecycle())

    assert {a.status for a in applied} == {Status.PROCESSED}
    (invoice,) = rows(hookledger_business, invoices)
    assert (invoice["status"], invoice["amount_paid"]) == ("paid", 4200)
    # one receipt, however often the paid event was applied: the outbox keeps one per key
    assert list(hookledger_deliver.messages.values()) == [
        {"invoice": INVOICE, "amount_paid": 4200, "currency": "eur", "customer": "cus_demo"}
        | {"number": None}
    ]
    credits = rows(hookledger_business, ledger)
    # the planted fault: the credit is appended, so each application of invoice.paid credits
    assert len(credits) == (1 if hookledger_deliver.way in ("once", "reversed") else 2)


def test_a_transient_failure_rolls_back_the_attempts_credit_and_the_retry_credits_once(
    hookledger_business: Engine, hookledger_handlers: HandlerRegistry, faults: Any, tmp_path: Path
) -> None:
    paid = lifecycle()[-1]
    plant(tmp_path, faults | {"transient": [paid.event_id]})

    (applied,) = Deliveries(hookledger_business, hookledger_handlers).deliver(paid)

    assert (applied.status, applied.attempts) == (Status.PROCESSED, 2)
    assert len(rows(hookledger_business, ledger)) == 1


def test_a_permanent_failure_ends_dead_and_says_why(
    hookledger_business: Engine, hookledger_handlers: HandlerRegistry, faults: Any, tmp_path: Path
) -> None:
    paid = lifecycle()[-1]
    plant(tmp_path, faults | {"permanent": [paid.event_id]})
    deliveries = Deliveries(hookledger_business, hookledger_handlers)

    with pytest.raises(HandlerFailed, match="ended dead after 1 attempt") as failed:
        deliveries.deliver(paid)
    assert isinstance(failed.value.__cause__, PermanentError)
    (applied,) = deliveries.deliver(paid, raise_dead=False)
    assert applied.status is Status.DEAD and isinstance(applied.error, PermanentError)
    assert rows(hookledger_business, invoices) == rows(hookledger_business, ledger) == []


def order_event(financial_status: str, updated_at: str) -> Event:
    document = sample_payload("shopify", "orders/updated")
    document |= {"id": 4242, "financial_status": financial_status, "updated_at": updated_at}
    return event_of("shopify", "orders/updated", payload=document)


def test_an_ambiguous_fulfilment_is_verified_not_repeated_and_the_newest_order_wins(
    hookledger_deliver: Deliver, hookledger_business: Engine, faults: Any, tmp_path: Path
) -> None:
    older = order_event("pending", "2026-12-01T10:00:00+00:00")
    newer = order_event("paid", "2026-12-01T10:05:00+00:00")
    plant(tmp_path, faults | {"ambiguous": [older.event_id]})

    applied = hookledger_deliver(older, newer)

    assert {a.status for a in applied} == {Status.PROCESSED}
    assert [(o["order_id"], o["financial_status"]) for o in rows(hookledger_business, orders)] == [
        ("4242", "paid")
    ]
    # the call that got no answer took effect once; verify found it instead of calling again
    assert rows(hookledger_business, fulfilments) == [{"event_id": older.event_id}]


def test_twilio_status_callbacks_in_any_order_leave_the_latest_status(
    hookledger_deliver: Deliver, hookledger_business: Engine
) -> None:
    fields = sample_payload("twilio")
    events = [
        event_of("twilio", payload=fields | {"MessageStatus": status})
        for status in ("queued", "sent", "delivered")
    ]

    hookledger_deliver(*events)

    (message,) = rows(hookledger_business, sms)
    assert (message["message_sid"], message["status"]) == (fields["MessageSid"], "delivered")
