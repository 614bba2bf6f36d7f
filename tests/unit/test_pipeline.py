"""Pages looked up ahead of the writer (reconcile.pipeline): threads and plain values, no I/O."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.reconcile.pipeline import looked_up


class Source:
    """Pages 0..n-1, optionally failing after ``fail_after`` of them; records who iterated it,
    how far ahead of the consumer it was taken and whether it was closed."""

    def __init__(self, n: int, fail_after: int | None = None) -> None:
        self.n, self.fail_after = n, fail_after
        self.taken = 0
        self.closed_on: str | None = None

    def pages(self) -> Iterator[int]:
        try:
            for i in range(self.n):
                if self.fail_after is not None and i == self.fail_after:
                    raise OSError(f"source failed at page {i}")
                self.taken += 1
                yield i
        finally:
            self.closed_on = threading.current_thread().name


def delayed(delays: dict[int, float]) -> Callable[[int], Callable[[], int]]:
    return lambda page: lambda: (time.sleep(delays.get(page, 0.0)), page * 10)[1]


@given(
    delays=st.lists(st.sampled_from([0.0, 0.0, 0.001, 0.005]), min_size=0, max_size=12),
    ahead=st.integers(0, 4),
)
@settings(max_examples=40, deadline=None)
def test_pages_come_back_in_order_with_their_own_look_up(delays: list[float], ahead: int) -> None:
    source = Source(len(delays))
    got = list(looked_up(source.pages(), delayed(dict(enumerate(delays))), ahead=ahead))
    assert got == [(i, i * 10) for i in range(len(delays))]
    assert source.closed_on is not None


def test_a_look_up_finishing_first_still_waits_for_the_pages_before_it() -> None:
    source = Source(4)
    got = list(looked_up(source.pages(), delayed({0: 0.2}), ahead=4))
    assert [page for page, _ in got] == [0, 1, 2, 3]


def test_plans_run_in_page_order_on_one_thread() -> None:
    seen: list[tuple[int, str]] = []

    def plan(page: int) -> Callable[[], int]:
        seen.append((page, threading.current_thread().name))
        return lambda: page

    list(looked_up(Source(20).pages(), plan, ahead=4))
    assert [p for p, _ in seen] == list(range(20))
    assert len({name for _, name in seen}) == 1


def test_never_more_than_ahead_pages_are_taken_before_the_writer_takes_one() -> None:
    """Memory stays flat: a slow writer stops the source."""
    source = Source(100)
    pages = looked_up(source.pages(), delayed({}), ahead=3)
    for page, _ in pages:
        time.sleep(0.005)
        # taken = written + in the handover (ahead) + the feeder's one waiting to be handed over
        assert source.taken <= page + 1 + 3 + 1
    assert source.taken == 100


def test_a_source_failure_comes_after_the_pages_listed_before_it() -> None:
    source = Source(10, fail_after=5)
    got: list[int] = []
    with pytest.raises(OSError, match="failed at page 5"):
        for page, _ in looked_up(source.pages(), delayed({}), ahead=2):
            got.append(page)
    assert got == [0, 1, 2, 3, 4]


def test_a_failed_look_up_is_raised_in_its_pages_turn() -> None:
    def plan(page: int) -> Callable[[], int]:
        def work() -> int:
            if page == 3:
                raise LookupError("business table refused")
            return page

        return work

    got: list[int] = []
    with pytest.raises(LookupError):
        for page, _ in looked_up(Source(10).pages(), plan, ahead=4):
            got.append(page)
    assert got == [0, 1, 2]


def test_leaving_early_stops_taking_pages_and_closes_the_source_on_its_own_thread() -> None:
    source = Source(1000)
    pages = looked_up(source.pages(), delayed({}), ahead=2)
    for page, _ in pages:
        if page == 3:
            break
    pages.close()
    assert source.closed_on == "page-feed"  # closed by the thread that iterates it
    assert source.taken < 10
    assert not [t for t in threading.enumerate() if t.name.startswith(("page-feed", "look-up"))]
