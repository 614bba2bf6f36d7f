"""Time slices without I/O: the split arithmetic, and the runner over a list in memory that pages
like Stripe (newest first, ``created`` bounds, a position after the last id)."""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.slices import (
    Slice,
    SliceFetch,
    pages_left,
    plan_split,
    run_slices,
    split_points,
)


def test_split_points_cut_a_span_into_whole_units() -> None:
    assert split_points(0, 100, 4) == [25, 50, 75]
    assert split_points(0, 2, 8) == [1]  # no more cuts than the span has units
    assert split_points(5, 5, 3) == []


def test_a_slice_whose_first_page_covers_a_tenth_of_it_has_nine_pages_left() -> None:
    s = Slice(0, 1000)
    assert pages_left(s, 900, 1) == pytest.approx(9)


def test_a_dense_slice_is_split_for_the_idle_fetchers_and_a_sparse_one_is_not() -> None:
    s = Slice(0, 1000, after="x")
    pieces = plan_split(s, oldest=900, pages_done=1, idle=3)
    assert [(p.start, p.end) for p in pieces] == [(0, 225), (225, 450), (450, 675)]
    assert plan_split(s, oldest=900, pages_done=1, idle=0) == []  # nobody to take them
    # the first page reached back to 600: under two pages left, not worth a request more
    assert plan_split(s, oldest=400, pages_done=1, idle=3) == []


@settings(max_examples=100, deadline=None)
@given(
    start=st.integers(0, 10_000),
    width=st.integers(1, 100_000),
    frac=st.floats(0, 1),
    pages=st.integers(1, 50),
    idle=st.integers(0, 64),
)
def test_a_split_covers_the_rest_of_the_slice_exactly_once(
    start: int, width: int, frac: float, pages: int, idle: int
) -> None:
    s = Slice(start, start + width)
    oldest = start + int(width * frac)
    pieces = plan_split(s, oldest, pages, idle)
    if not pieces:
        return
    assert len(pieces) <= idle
    assert pieces[0].start == start and pieces[-1].end <= oldest
    for a, b in itertools.pairwise(pieces):
        assert a.end == b.start and a.start < a.end


class Source:
    """Events as (created, id), listed newest first within ``[start, end)`` after an id."""

    def __init__(self, times: Sequence[int], page_size: int) -> None:
        self.events = sorted(((t, f"e{i:06d}") for i, t in enumerate(times)), reverse=True)
        self.page_size = page_size
        self.calls = 0
        self.lock = threading.Lock()

    def fetch(self, s: Slice) -> SliceFetch:
        with self.lock:
            self.calls += 1
        inside = [e for e in self.events if s.start <= e[0] < s.end]
        if s.after is not None:
            ids = [i for _, i in inside]
            inside = inside[ids.index(s.after) + 1 :]
        page = inside[: self.page_size]
        more = len(inside) > self.page_size
        return SliceFetch(
            page, page[-1][1] if page else s.after, more, page[-1][0] if page else None, "mem"
        )


def collect(pages: object) -> list[str]:
    return [i for p in pages for _, i in p.fetched.items]  # type: ignore[attr-defined]


@settings(max_examples=40, deadline=None)
@given(
    times=st.lists(st.integers(0, 5000), max_size=400),
    page_size=st.integers(1, 40),
    concurrency=st.sampled_from([1, 4, 16]),
)
def test_every_record_is_listed_once_whatever_the_concurrency(
    times: list[int], page_size: int, concurrency: int
) -> None:
    source = Source(times, page_size)
    pages = list(run_slices([Slice(0, 5001)], source.fetch, concurrency=concurrency))
    got = collect(pages)
    assert sorted(got) == sorted(i for _, i in source.events)
    assert len(got) == len(set(got))
    assert pages[-1].done and all(s.done for s in pages[-1].plan)
    assert not any(p.done for p in pages[:-1])


@settings(max_examples=30, deadline=None)
@given(
    times=st.lists(st.integers(0, 5000), min_size=1, max_size=300),
    page_size=st.integers(1, 30),
    concurrency=st.sampled_from([4, 16]),
    stop=st.integers(1, 40),
    seed=st.integers(0, 1000),
)
def test_a_run_stopped_after_any_page_resumes_from_its_plan_and_lists_the_rest_once(
    times: list[int], page_size: int, concurrency: int, stop: int, seed: int
) -> None:
    """The plan handed out with a page is what the cursor stores with it: a resumed run lists
    exactly what the stored pages did not."""
    source = Source(times, page_size)
    first: list[str] = []
    plan: Sequence[Slice] = [Slice(0, 5001)]
    runs = 0
    rng = random.Random(seed)
    while True:
        runs += 1
        gen = run_slices(plan, source.fetch, concurrency=concurrency)
        done = False
        for n, page in enumerate(gen, 1):
            first += [i for _, i in page.fetched.items]
            plan = page.plan
            if page.done:
                done = True
                break
            if n >= stop and rng.random() < 0.5:  # killed: the later pages were never stored
                gen.close()
                break
        if done or all(s.done for s in plan):
            break
        assert runs < 500
    assert sorted(first) == sorted(i for _, i in source.events)


def test_a_fetch_error_reaches_the_consumer_and_stops_the_fetchers() -> None:
    calls = []

    def fetch(s: Slice) -> SliceFetch:
        calls.append(s)
        if len(calls) == 3:
            raise RuntimeError("provider down")
        return SliceFetch([(s.end - 1, f"x{len(calls)}")], f"x{len(calls)}", True, s.end - 1, "u")

    with pytest.raises(RuntimeError, match="provider down"):
        list(run_slices([Slice(0, 10**6)], fetch, concurrency=4))
    settled = len(calls)
    threading.Event().wait(0.3)
    assert len(calls) == settled  # nobody fetches after the consumer has stopped


def test_the_handover_queue_bounds_pages_held_in_memory() -> None:
    fetched = []

    def fetch(s: Slice) -> SliceFetch:
        fetched.append(s)
        oldest = s.end - 1 - len(fetched)
        return SliceFetch([(oldest, str(len(fetched)))], str(len(fetched)), True, oldest, "u")

    gen = run_slices([Slice(0, 10**6)], fetch, concurrency=4, queue_pages=3)
    next(gen)
    threading.Event().wait(0.5)  # the consumer is slow: fetchers stop at the bound
    assert len(fetched) <= 1 + 3 + 4  # the page taken, the queue, one in each fetcher's hand
    gen.close()


def test_a_finished_plan_fetches_nothing() -> None:
    assert list(run_slices([Slice(0, 5, done=True)], lambda s: 1 / 0, concurrency=2)) == []  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize(
    "bad", [[1, 0, None, False], [0, "x", None, False], [0, 1, 5, False], [0, 1], "x"]
)
def test_a_stored_slice_that_is_not_one_is_refused(bad: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        Slice.from_json(bad)


@settings(max_examples=300, deadline=None)
@given(
    value=st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
        lambda inner: st.lists(inner, max_size=5),
        max_leaves=8,
    )
)
def test_any_stored_slice_is_a_slice_or_refused(value: object) -> None:
    """A cursor read back from the database (or edited by hand): a valid slice or a ValueError /
    TypeError the connector turns into one line naming the source."""
    try:
        piece = Slice.from_json(value)
    except (ValueError, TypeError):
        return
    assert type(piece.start) is int and type(piece.end) is int  # epoch seconds, not booleans
    assert piece.start <= piece.end and (piece.after is None or isinstance(piece.after, str))
    assert Slice.from_json(piece.as_json()) == piece
