"""The run's page loop (reconcile.run.write_pages) through the page pipeline, on the in-memory
store: what is asked of the store, by name and in order (no database, no I/O)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.exc import OperationalError

from connectors.base import Capabilities, Page, Record
from reconciler.errors import HookledgerError
from reconciler.reconcile import judge
from reconciler.reconcile.lookup import NO_FACTS, PageFacts
from reconciler.reconcile.page_judge import PageJudge
from reconciler.reconcile.pipeline import looked_up
from reconciler.reconcile.run import write_pages
from reconciler.reconcile.summary import RunSummary
from tests.memory_store import NOW, MemoryStore

SOURCE = judge.Source(Capabilities(object_path=("data", "object")))


def record(event_id: str) -> Record:
    return Record(
        event_id, "invoice.paid", "invoice", f"in_{event_id}", NOW - timedelta(hours=1), None, {}
    )


def pages(ids: list[list[str]], fail_after: int | None = None) -> Iterator[Page]:
    for i, page in enumerate(ids):
        if fail_after is not None and i == fail_after:
            raise HookledgerError(f"source 'memory': page {i} failed")
        yield Page(tuple(map(record, page)), {"after": i}, done=i == len(ids) - 1)


def nothing(page: Page) -> Callable[[], PageFacts]:
    return lambda: NO_FACTS


def run(store: MemoryStore, source: Iterator[Page], ahead: int = 0) -> RunSummary:
    summary = RunSummary("run-1", "memory", "running")
    write_pages(store, looked_up(source, nothing, ahead=ahead), PageJudge([], SOURCE, NOW), summary)
    return summary


def test_each_page_is_looked_up_then_written_with_its_own_cursor_in_order() -> None:
    store = MemoryStore(inbox=["a", "b", "d"])
    summary = run(store, pages([["a", "b"], ["c"], ["d"]]), ahead=2)
    assert store.calls.names() == ["lookup", "write"] * 3 + ["end_pages"]
    assert [cursor for _, cursor in store.calls.args("write")] == [
        {"after": 0},
        {"after": 1},
        {"after": 2},
    ]
    assert [f.record_key for f in store.findings] == ["c"]
    assert (summary.pages, summary.records_scanned, summary.found) == (3, 4, {"missing": 1})


def test_relisted_records_are_seen_before_the_page_is_written_but_never_judged() -> None:
    store = MemoryStore(inbox=["a"])
    relisted = Page((record("a"),), {"after": 0}, done=True, relisted=(record("gone"),))
    run(store, iter([relisted]))
    assert store.calls.names() == ["lookup", "relisted", "write", "end_pages"]
    assert store.findings == [] and store.seen == ["gone", "a"]


def test_a_failing_source_keeps_the_pages_read_before_it() -> None:
    store = MemoryStore(inbox=["a", "b"])
    with pytest.raises(HookledgerError, match="page 2 failed"):
        run(store, pages([["a"], ["b"], ["c"]], fail_after=2), ahead=2)
    assert store.calls.names() == ["lookup", "write", "lookup", "write", "end_pages"]
    assert store.cursor == {"after": 1}


def test_a_database_that_fails_too_leaves_the_sources_error_the_one_raised() -> None:
    failure = OperationalError("INSERT", {}, Exception("server closed the connection"))
    store = MemoryStore(inbox=["a"], fail_on="end_pages", failure=failure)
    with pytest.raises(HookledgerError, match="page 1 failed"):
        run(store, pages([["a"], ["b"]], fail_after=1))
    assert store.calls.names()[-1] == "end_pages"


@given(
    ids=st.lists(
        st.lists(st.text("abcdef", min_size=1, max_size=3), max_size=4), min_size=1, max_size=6
    ),
    inbox=st.sets(st.text("abcdef", min_size=1, max_size=3)),
    ahead=st.integers(0, 3),
)
@settings(max_examples=50, deadline=None)
def test_every_listed_id_is_seen_once_a_listing_and_missing_only_when_the_inbox_lacks_it(
    ids: list[list[str]], inbox: set[str], ahead: int
) -> None:
    store = MemoryStore(inbox=sorted(inbox))
    run(store, pages(ids), ahead=ahead)
    listed = [i for page in ids for i in page]
    assert store.seen == listed
    assert {f.record_key for f in store.findings} == {i for i in listed if i not in inbox}
    assert store.cursor == {"after": len(ids) - 1}
