"""The judge, table by table: records and facts in, findings and verdicts out (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from connectors.base import Capabilities, DeliveryAttempt, Record
from reconciler.config import CheckSettings
from reconciler.reconcile import judge
from reconciler.reconcile.judge import BusinessFacts, InboxFacts
from reconciler.states import DiscrepancyKind as K

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
STRIPE = judge.Source(Capabilities(object_path=("data", "object")), timedelta(days=30))
GITHUB = judge.Source(Capabilities(delivery_log=True))
INVOICES = CheckSettings(
    object_type="invoice",
    table="invoices",
    key="stripe_invoice_id",
    fields={"status": "status", "amount_paid": "amount_paid"},
    unique_by="stripe_invoice_id",
    amount="amount_paid",
    currency="currency",
)


def event(
    event_id: str | None,
    object_id: str = "in_1",
    *,
    minutes_ago: float = 60,
    status: str = "paid",
    amount: int = 500,
    object_type: str = "invoice",
    attempts: tuple[DeliveryAttempt, ...] = (),
) -> Record:
    obj = {"id": object_id, "status": status, "amount_paid": amount, "currency": "EUR"}
    return Record(
        event_id,
        f"{object_type}.updated",
        object_type,
        object_id,
        NOW - timedelta(minutes=minutes_ago),
        None,
        {"data": {"object": obj}} if event_id else obj,
        attempts,
    )


def attempt(status: str) -> DeliveryAttempt:
    return DeliveryAttempt("a", NOW, status, 200 if status == "OK" else 500)


def kinds(findings: list[judge.Finding]) -> list[tuple[str, str, str]]:
    return [(f.kind.value, f.record_key, f.field) for f in findings]


# -- settled ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("minutes_ago", "judged"), [(120, True), (10, True), (9.9, False), (-5, False)]
)
def test_only_records_older_than_the_grace_period_are_judged(
    minutes_ago: float, judged: bool
) -> None:
    records = [event("evt_1", minutes_ago=minutes_ago)]
    assert (judge.settled(records, NOW - timedelta(minutes=10)) == records) is judged


def test_a_record_without_a_time_is_always_judged() -> None:
    timeless = event(None)._replace(occurred_at=None)
    assert judge.settled([timeless], NOW) == [timeless]


# -- missing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("records", "facts", "expected"),
    [
        ([event("evt_1"), event("evt_2")], InboxFacts(frozenset({"evt_2"})), ["evt_2"]),
        ([event("evt_1"), event("evt_1")], InboxFacts(frozenset({"evt_1"})), ["evt_1"]),  # once
        ([event("evt_1")], InboxFacts(), []),
        # state records are judged by object
        ([event(None, "in_9")], InboxFacts(), ["invoice:in_9"]),
        ([event(None, "in_9")], InboxFacts(present_objects=frozenset({("invoice", "in_9")})), []),
    ],
)
def test_missing_is_what_the_inbox_lacks_once_per_key(
    records: list[Record], facts: InboxFacts, expected: list[str]
) -> None:
    found = judge.missing(records, facts, STRIPE)
    assert [(f.kind, f.record_key) for f in found] == [(K.MISSING, k) for k in expected]


@pytest.mark.parametrize(
    ("source", "attempts", "cause", "detail"),
    [
        (STRIPE, (), "not_received", {}),
        (GITHUB, (), "not_received", {"attempts": 0}),
        (GITHUB, (attempt("OK"),), "lost_after_ack", {"attempts": 1}),
        (GITHUB, (attempt("failed"), attempt("failed")), "provider_failed", {"attempts": 2}),
        (GITHUB, (attempt("failed"), attempt("OK")), "lost_after_ack", {"attempts": 2}),
    ],
)
def test_a_missing_events_cause_comes_from_the_providers_delivery_log(
    source: judge.Source, attempts: tuple[DeliveryAttempt, ...], cause: str, detail: dict[str, Any]
) -> None:
    (found,) = judge.missing(
        [event("g1", attempts=attempts)], InboxFacts(frozenset({"g1"})), source
    )
    assert (found.cause, found.detail) == (cause, detail)


def test_a_missing_event_carries_its_money_and_the_last_day_it_can_be_recovered() -> None:
    record = event("evt_1", amount=11630)
    (found,) = judge.missing([record], InboxFacts(frozenset({"evt_1"})), STRIPE, [INVOICES])
    assert (found.amount, found.currency) == (11630, "EUR")
    assert found.recover_by == record.occurred_at + timedelta(days=30)
    (other,) = judge.missing([record], InboxFacts(frozenset({"evt_1"})), GITHUB)
    assert (other.amount, other.recover_by) == (None, None)  # no check applies, no retention


@pytest.mark.parametrize(
    ("event_id", "present_events", "present_objects", "fixed"),
    [
        ("evt_1", {"evt_1"}, set(), True),
        ("evt_1", set(), {("invoice", "in_1")}, False),  # an event is fixed by its own id only
        (None, set(), {("invoice", "in_1")}, True),
        (None, {"evt_1"}, set(), False),
    ],
)
def test_a_missing_record_is_fixed_once_the_inbox_holds_it(
    event_id: str | None,
    present_events: set[str],
    present_objects: set[tuple[str, str]],
    fixed: bool,
) -> None:
    key = ("invoice", "in_1")
    assert judge.missing_fixed(event_id, key, present_events, present_objects) is fixed


# -- the business tables ----------------------------------------------------------------------------


def row(status: str = "paid", amount: int = 500) -> dict[str, Any]:
    return {"stripe_invoice_id": "in_1", "status": status, "amount_paid": amount}


def test_an_object_is_judged_by_its_newest_record_once_one_of_its_records_was_received() -> None:
    old, new = event("evt_old", minutes_ago=90), event("evt_new", minutes_ago=30, status="void")
    other = event("evt_other", "in_2")
    received = judge.received([old, new, other], InboxFacts(frozenset({"evt_new", "evt_other"})))
    assert received == {"evt_old"}
    latest = judge.latest_received(INVOICES, [old, new, other], received)
    assert latest == {"in_1": new}  # the newest, although it was not received
    assert judge.latest_received(INVOICES, [event("c1", object_type="charge")], {"c1"}) == {}


@pytest.mark.parametrize(
    ("facts", "check", "expected"),
    [
        (BusinessFacts({"in_1": [row()]}), INVOICES, []),
        (BusinessFacts({}), INVOICES, [("unapplied", "invoices:in_1", "")]),
        (BusinessFacts({}), INVOICES.model_copy(update={"require_row": False}), []),
        (
            BusinessFacts({"in_1": [row(), row()]}),
            INVOICES,
            [("duplicate", "invoices:in_1", "")],
        ),
        (
            BusinessFacts({"in_1": [row()]}, {"in_1": 3}),
            INVOICES,
            [("duplicate", "invoices:in_1", "")],
        ),
        (
            BusinessFacts({"in_1": [row(status="open", amount=7)]}),
            INVOICES,
            [("diverged", "invoices:in_1", "status"), ("diverged", "invoices:in_1", "amount_paid")],
        ),
        (
            BusinessFacts({"in_1": [row(status="open")]}),
            INVOICES.model_copy(update={"fields": {}}),
            [],
        ),
        (BusinessFacts({"in_1": [row(status="PAID ", amount=500)]}), INVOICES, []),  # normalised
    ],
)
def test_business_findings_of_one_check(
    facts: BusinessFacts, check: CheckSettings, expected: list[tuple[str, str, str]]
) -> None:
    latest = {"in_1": event("evt_1")}
    assert kinds(judge.business(check, latest, facts, STRIPE)) == expected


def test_a_divergence_is_confirmed_with_the_objects_current_state() -> None:
    latest = {"in_1": event("evt_1", status="open")}  # the snapshot says open, the row says paid
    facts = BusinessFacts({"in_1": [row(status="paid")]})
    assert judge.to_confirm(INVOICES, latest, facts, STRIPE) == [("invoice", "in_1")]
    paid = {"id": "in_1", "status": "paid", "amount_paid": 500}
    assert judge.business(INVOICES, latest, facts, STRIPE, {("invoice", "in_1"): paid}) == []
    # the provider could not say: the snapshot stands
    (found,) = judge.business(INVOICES, latest, facts, STRIPE, {("invoice", "in_1"): None})
    assert (found.field, found.source_value, found.local_value) == ("status", "open", "paid")
    assert found.detail == {"table": "invoices", "path": "status"}
    # nothing to confirm where the row agrees or is absent
    assert judge.to_confirm(INVOICES, latest, BusinessFacts({"in_1": [row("open")]}), STRIPE) == []
    assert judge.to_confirm(INVOICES, latest, BusinessFacts(), STRIPE) == []


THIN = judge.Source(Capabilities(confirms_event_ids=True, snapshots=False), timedelta(days=30))


def thin_event(object_id: str = "in_1") -> Record:
    """A v2 thin event: its object by reference, no state."""
    payload = {"id": "evt_t", "related_object": {"id": object_id, "type": "invoice"}}
    return Record("evt_t", "v1.invoice.paid", "invoice", object_id, NOW, None, payload)


def test_a_record_without_a_snapshot_is_judged_by_the_current_state_alone() -> None:
    """A thin event carries no state: every business row is compared with the object read from
    the API, and none where the provider could not say (never with the empty record)."""
    latest = {"in_1": thin_event()}
    unset = BusinessFacts(
        {"in_1": [{"stripe_invoice_id": "in_1", "status": None, "amount_paid": 500}]}
    )
    # the row's empty column would match the record's absent one: asked all the same
    assert judge.to_confirm(INVOICES, latest, unset, THIN) == [("invoice", "in_1")]
    current = {("invoice", "in_1"): {"id": "in_1", "status": "paid", "amount_paid": 500}}
    (found,) = [f for f in judge.business(INVOICES, latest, unset, THIN, current) if f.field]
    assert (found.field, found.source_value) == ("status", "paid")
    facts = BusinessFacts({"in_1": [row(status="open")]})
    assert judge.business(INVOICES, latest, facts, THIN, {("invoice", "in_1"): None}) == []
    assert judge.business(INVOICES, latest, facts, THIN, {}) == []


@pytest.mark.parametrize(
    ("kind", "field", "source_value", "facts", "fixed"),
    [
        (K.UNAPPLIED, "", None, BusinessFacts({"in_1": [row()]}), True),
        (K.UNAPPLIED, "", None, BusinessFacts(), False),
        (K.DUPLICATE, "", None, BusinessFacts({"in_1": [row()]}), True),
        (K.DUPLICATE, "", None, BusinessFacts({"in_1": [row(), row()]}), False),
        (K.DUPLICATE, "", None, BusinessFacts({"in_1": [row()]}, {"in_1": 2}), False),
        (K.DUPLICATE, "", None, BusinessFacts(), True),  # none left is not a duplicate
        (K.DIVERGED, "status", '"paid"', BusinessFacts({"in_1": [row("paid")]}), True),
        (K.DIVERGED, "status", '"paid"', BusinessFacts({"in_1": [row("void")]}), False),
        (K.DIVERGED, "amount_paid", "500", BusinessFacts({"in_1": [row(amount=500)]}), True),
        (K.DIVERGED, "status", "paid", BusinessFacts({"in_1": [row("paid")]}), True),  # not JSON
        (K.DIVERGED, "status", '"paid"', BusinessFacts(), False),  # the row went away
        (K.MISSING, "", None, BusinessFacts({"in_1": [row()]}), False),  # not a business kind
    ],
)
def test_an_open_business_discrepancy_is_fixed_when_the_table_agrees(
    kind: K, field: str, source_value: str | None, facts: BusinessFacts, fixed: bool
) -> None:
    assert judge.business_fixed(kind, field, source_value, "in_1", facts) is fixed


def test_the_judge_imports_no_database_http_or_ui_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys, reconciler.reconcile.judge, reconciler.reconcile.compare; "
        "print(sorted(m for m in ('sqlalchemy', 'httpx', 'streamlit', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
