"""The judge stage of a page (reconcile.page_judge): records, inbox facts and looked-up facts in,
findings out, with the memory of what it judged already (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from connectors.base import Capabilities, Record
from reconciler.config import CheckSettings
from reconciler.reconcile import judge
from reconciler.reconcile.judge import BusinessFacts, InboxFacts
from reconciler.reconcile.lookup import PageFacts
from reconciler.reconcile.page_judge import PageJudge
from reconciler.reconcile.recent import NewestMet

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
STRIPE = judge.Source(Capabilities(object_path=("data", "object")), timedelta(days=30))
INVOICES = CheckSettings(
    object_type="invoice",
    table="invoices",
    key="stripe_invoice_id",
    fields={"status": "status"},
)


def event(event_id: str, object_id: str, status: str, minutes_ago: float) -> Record:
    obj = {"id": object_id, "object": "invoice", "status": status}
    return Record(
        event_id,
        "invoice.updated",
        "invoice",
        object_id,
        NOW - timedelta(minutes=minutes_ago),
        None,
        {"data": {"object": obj}},
    )


def rows(**status: str) -> BusinessFacts:
    return BusinessFacts(
        {oid: [{"stripe_invoice_id": oid, "status": s}] for oid, s in status.items()}
    )


def found(findings: list[judge.Finding]) -> list[tuple[str, str, str]]:
    return [(f.kind.value, f.record_key, f.field) for f in findings]


def test_a_newer_record_judged_on_an_earlier_page_keeps_the_older_one_from_being_judged() -> None:
    page_judge = PageJudge([INVOICES], STRIPE, NOW)
    newest = [event("evt_2", "in_1", "paid", 10)]
    older = [event("evt_1", "in_1", "open", 20)]
    facts = PageFacts((rows(in_1="paid"),))
    assert page_judge(newest, InboxFacts(), facts) == []
    # the row agrees with the newest record: the older snapshot on a later page is not judged
    assert page_judge(older, InboxFacts(), facts) == []
    # a fresh judge, given only the older page, calls the row diverged from it
    assert found(PageJudge([INVOICES], STRIPE, NOW)(older, InboxFacts(), facts)) == [
        ("diverged", "invoices:in_1", "status")
    ]


def test_the_current_state_looked_up_decides_a_divergence_and_stale_objects_wait() -> None:
    page_judge = PageJudge([INVOICES], STRIPE, NOW)
    page = [event("evt_1", "in_1", "open", 10), event("evt_2", "in_2", "open", 10)]
    facts = PageFacts(
        (rows(in_1="paid", in_2="paid"),),
        current={("invoice", "in_1"): {"id": "in_1", "status": "paid"}},
        stale=frozenset({("invoice", "in_2")}),
    )
    # in_1: the provider says paid now, as the row does; in_2: a newer event of it is in the inbox
    assert page_judge(page, InboxFacts(), facts) == []


def test_missing_events_are_judged_without_any_business_check() -> None:
    page_judge = PageJudge([], STRIPE, NOW)
    page = [event("evt_1", "in_1", "open", 10), event("evt_2", "in_2", "open", 10)]
    got = page_judge(page, InboxFacts(absent_events=frozenset({"evt_2"})), PageFacts())
    assert found(got) == [("missing", "evt_2", "")]


def test_a_record_inside_the_grace_period_is_not_judged() -> None:
    page_judge = PageJudge([INVOICES], STRIPE, NOW - timedelta(minutes=15))
    page = [event("evt_1", "in_1", "open", 10)]
    got = page_judge(page, InboxFacts(absent_events=frozenset({"evt_1"})), PageFacts((rows(),)))
    assert got == []


def test_the_memory_forgets_the_oldest_objects_first() -> None:
    met = NewestMet(remembered=2)
    for i in range(3):
        met.remember(0, [event(f"evt_{i}", f"in_{i}", "paid", 10)])
    older = {f"in_{i}": event(f"old_{i}", f"in_{i}", "open", 20) for i in range(3)}
    assert set(met.without_older(0, older)) == {"in_0"}  # forgotten: judged again
    assert set(met.without_older(1, older)) == set(older)  # another check's memory is its own


def test_an_object_stale_on_one_page_is_not_judged_on_an_older_record_later() -> None:
    """A sliced scan meets pages in any order: the inbox held a newer event of in_1 than the page's
    record (stale: not judged there, the look-up asks nothing about its older records after), and
    a later page lists an older record still, which must not be called diverged from."""
    page_judge = PageJudge([INVOICES], STRIPE, NOW)
    facts = PageFacts((rows(in_1="paid"),), stale=frozenset({("invoice", "in_1")}))
    assert page_judge([event("evt_2", "in_1", "open", 10)], InboxFacts(), facts) == []
    older = [event("evt_1", "in_1", "draft", 20)]
    assert page_judge(older, InboxFacts(), PageFacts((rows(in_1="paid"),))) == []


def test_an_older_record_does_not_make_its_object_recently_met() -> None:
    """The look-up meets every listed object, the judge only those it judges: were an older record
    to refresh an object in the look-up's memory, the judge could forget the object first and judge
    an older record on rows the look-up never read."""
    met = NewestMet(remembered=2)
    met.remember(0, [event("evt_2", "in_1", "paid", 10)])
    met.remember(0, [event("evt_3", "in_2", "paid", 10)])
    met.remember(0, [event("evt_1", "in_1", "open", 20)])  # older: in_1 stays the oldest met
    met.remember(0, [event("evt_4", "in_3", "paid", 10)])
    older = {o: event(f"old_{o}", o, "open", 30) for o in ("in_1", "in_2", "in_3")}
    assert set(met.without_older(0, older)) == {"in_1"}  # forgotten first
