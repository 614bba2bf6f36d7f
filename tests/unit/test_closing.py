"""The passes after a scan's last page (reconcile.closing) on the in-memory store: which passes
run for which source, in what order and transaction (no database)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from connectors.errors import NotFoundError, UnavailableError
from reconciler.reconcile import closing
from reconciler.reconcile.summary import RunSummary
from reconciler.states import DiscrepancyKind as K
from tests.memory_store import NOW, MemoryStore

GRACE = timedelta(minutes=15)
WINDOW = (NOW - timedelta(days=1), NOW - timedelta(minutes=1))


def after_pages(store: MemoryStore, *, lists_events: bool = True) -> RunSummary:
    summary = RunSummary("run-1", "memory", "running")
    closing.after_pages(
        store,
        None,  # type: ignore[arg-type]  # (no business checks: never read)
        [],
        summary,
        lists_events=lists_events,
        scope=None,
        grace=GRACE,
        stuck_after=timedelta(hours=1),
    )
    return summary


def test_a_listing_source_runs_every_pass_in_one_transaction_and_counts_what_they_find() -> None:
    store = MemoryStore(
        answers={
            "window": (WINDOW, 3),
            "orphans": 2,
            "stuck_and_dead": (1, 4),
            "resolve_set_kinds": 5,
        }
    )
    summary = after_pages(store)
    assert store.calls.names() == [
        "transaction",
        "window",
        "open_kinds",
        "orphans",
        "stuck_and_dead",
        "resolve_set_kinds",
        "first_unlisted_in_grace",
        "forget_seen",
        "detection_delays",
        "commit",
    ]
    assert summary.found == {"orphaned": 2, "stuck": 1, "dead": 4}
    assert summary.resolved == 5


def test_a_source_that_lists_objects_not_events_never_looks_for_orphans() -> None:
    store = MemoryStore(answers={"window": (WINDOW, 3)})
    after_pages(store, lists_events=False)
    names = store.calls.names()
    assert "orphans" not in names and "first_unlisted_in_grace" not in names


def test_a_scan_that_listed_nothing_has_no_window_to_look_for_orphans_in() -> None:
    store = MemoryStore()
    after_pages(store)
    assert "orphans" not in store.calls.names()


@pytest.mark.parametrize(
    ("open_kinds", "rechecked"),
    [(set(), False), ({K.STUCK, K.ORPHANED}, False), ({K.MISSING}, True), ({K.DIVERGED}, True)],
)
def test_what_is_open_is_read_first_and_the_judged_kinds_are_rechecked_only_when_open(
    open_kinds: set[K], rechecked: bool
) -> None:
    """The resolution passes are given what was open before the passes added to it; the judge's
    fix rules read open discrepancies back only where some of their kinds are open."""
    store = MemoryStore(answers={"window": (WINDOW, 3), "open_kinds": open_kinds})
    after_pages(store)
    assert store.calls.args("resolve_set_kinds") == [(open_kinds,)]
    assert ("open_judged" in store.calls.names()) is rechecked


class Provider:
    """fetch_event: NotFound for ``unknown`` ids, Unavailable for ``failing`` ones."""

    def __init__(
        self, unknown: frozenset[str] = frozenset(), failing: frozenset[str] = frozenset()
    ) -> None:
        self.unknown, self.failing = unknown, failing
        self.asked: list[str] = []

    def fetch_event(self, event_id: str) -> Mapping[str, Any]:
        self.asked.append(event_id)
        if event_id in self.unknown:
            raise NotFoundError(f"no event {event_id}")
        if event_id in self.failing:
            raise UnavailableError("source 'memory': 503")
        return {"id": event_id}


def late_orphans(store: MemoryStore, provider: Provider, window: Any = WINDOW) -> RunSummary:
    summary = RunSummary("run-1", "memory", "running")
    closing.late_orphans(
        store,
        provider,
        summary,
        window=window,
        scope=None,
        grace=GRACE,  # type: ignore[arg-type]
    )
    return summary


def candidates(*ids: str) -> list[tuple[str, Any]]:
    return [(i, NOW - timedelta(hours=10 - n)) for n, i in enumerate(ids)]


def test_late_events_the_provider_does_not_know_are_orphans_and_the_watermark_moves_to_now() -> (
    None
):
    store = MemoryStore(
        answers={
            "orphan_watermark": NOW - timedelta(days=2),
            "late_orphan_candidates": candidates("e1", "e2", "e3"),
            "orphans_by_id": lambda ids: len(ids),
        }
    )
    provider = Provider(unknown=frozenset({"e2"}))
    summary = late_orphans(store, provider)
    assert provider.asked == ["e1", "e2", "e3"]
    assert store.calls.args("orphans_by_id") == [(["e2"],)]
    assert store.calls.args("save_orphan_watermark") == [(NOW,)]
    assert summary.found == {"orphaned": 1}
    # the provider is asked between two transactions, never inside one
    names = store.calls.names()
    assert names.index("commit") < names.index("orphans_by_id") and names.count("transaction") == 2


def test_a_provider_that_cannot_answer_stops_the_watermark_just_before_that_event() -> None:
    events = candidates("e1", "e2", "e3")
    store = MemoryStore(
        answers={"orphan_watermark": NOW - timedelta(days=2), "late_orphan_candidates": events}
    )
    late_orphans(store, Provider(failing=frozenset({"e2"})))
    (saved,) = store.calls.args("save_orphan_watermark")
    assert saved == (events[1][1] - timedelta(microseconds=1),)


def test_a_dry_run_and_a_first_run_without_a_window_move_no_watermark_it_should_not() -> None:
    dry = MemoryStore(answers={"late_orphan_candidates": candidates("e1")}, dry_run=True)
    late_orphans(dry, Provider(unknown=frozenset({"e1"})))
    assert "save_orphan_watermark" not in dry.calls.names()
    first = MemoryStore()
    provider = Provider()
    late_orphans(first, provider, window=None)
    assert provider.asked == [] and first.calls.args("save_orphan_watermark") == [(NOW,)]
