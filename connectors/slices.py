"""A scan's window paged as time slices at once, within the source's request budget.

A provider's list is paged one request after another (each page's request needs the previous
page's cursor), so a sequential scan goes at the provider's latency: about 3 pages a second at
300 ms, where the provider allows 25 or 100 requests a second. A list that takes an upper time
bound as well as a lower one (Stripe's ``created[gte]``/``created[lt]``, Shopify's
``updated_at_min``/``updated_at_max``) can be read as several time slices, each paged on its own.

How the slices are made: the window starts as one slice. After each page, the slice's own pace
(the span its pages covered so far) estimates how many pages remain in it; while a fetcher is idle
and more than one page remains, the rest of the slice is split, the fetcher keeping the newest part
and the idle ones taking the others. So slices are made only where the records are (a dense hour is
split again, an empty week costs one request) and never end up sparse: there is nothing to merge.

The guarantees of a sequential scan stay:

- **One writer, flat memory.** Fetchers hand pages over through a bounded queue to the one thread
  that consumes :func:`run_slices` (the scan's database writer); a slow writer stops the fetchers.
- **A cursor that moves with its data.** The plan (every slice's bounds, its position within itself
  and whether it is done) is changed only by the consumer, as it takes each page, and handed out with
  that page: the cursor stored with a page covers exactly the pages stored before it. A killed run
  resumes every unfinished slice from its own last stored page; the source's position after the
  window (its checkpoint) is set only once every slice is done.

Pure of any provider: the provider gives how to fetch one page of a slice (:class:`SliceFetch`).
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

_END = object()
POLL_SECONDS = 0.1


@dataclass(frozen=True)
class Slice:
    """``[start, end)`` in the provider's time unit (epoch seconds); ``after``: the provider's
    position within the slice after its last stored page (None: from its newest record)."""

    start: int
    end: int
    after: str | None = None
    done: bool = False

    def as_json(self) -> list[Any]:
        return [self.start, self.end, self.after, self.done]

    @classmethod
    def from_json(cls, value: Any) -> Slice:
        start, end, after, done = value
        bounds_ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end))
        if not bounds_ok or start > end:
            raise ValueError(f"not a slice: {value!r}")
        if after is not None and not isinstance(after, str):
            raise ValueError(f"not a slice position: {after!r}")
        return cls(start, end, after, bool(done))


@dataclass(frozen=True)
class SliceFetch:
    """One page of one slice, as the provider answered it."""

    items: Sequence[Any]  # the page's records, as the provider's connector reads them
    after: str | None  # the position after this page within the slice
    more: bool  # the slice has more pages
    oldest: int | None  # the oldest time on the page (records come newest first)
    url: str


@dataclass(frozen=True)
class SlicePage:
    """A page handed to the consumer, with the plan as it stands once the page is stored."""

    fetched: SliceFetch
    plan: tuple[Slice, ...]  # ordered by start
    done: bool  # every slice is done: this is the window's last page


@dataclass
class _Plan:
    """The consumer's plan: slices by id (ids stay stable while fetchers split)."""

    slices: dict[int, Slice] = field(default_factory=dict)

    def ordered(self) -> tuple[Slice, ...]:
        return tuple(sorted(self.slices.values(), key=lambda s: (s.start, s.end)))

    def finished(self) -> bool:
        return all(s.done for s in self.slices.values())


@dataclass(frozen=True)
class _Message:
    slice_id: int
    fetched: SliceFetch
    bounds: tuple[int, int]  # the slice's bounds after this page (a split moves its start)
    pieces: tuple[tuple[int, Slice], ...]  # slices split off it, with their ids


def split_points(start: int, oldest: int, pieces: int) -> list[int]:
    """Where ``[start, oldest]`` is cut into ``pieces`` spans of whole time units, oldest first
    (pure). Fewer cuts where the span is too short."""
    span = oldest - start
    pieces = max(1, min(pieces, span))
    return [start + span * i // pieces for i in range(1, pieces)]


def pages_left(slice_: Slice, covered_from: int, pages_done: int) -> float:
    """How many pages remain in ``[slice.start, covered_from)`` at the pace the slice's pages
    have gone so far (pure)."""
    covered = max(1, slice_.end - covered_from)
    return (covered_from - slice_.start) * pages_done / covered


def plan_split(slice_: Slice, oldest: int, pages_done: int, idle: int) -> list[Slice]:
    """The slices to split off ``slice_`` now that its pages reached ``oldest``, given ``idle``
    fetchers (pure). The slice keeps ``[last cut, end)``; the returned slices cover
    ``[start, last cut)``. Empty: do not split."""
    if idle <= 0 or oldest <= slice_.start:
        return []
    left = pages_left(slice_, oldest, pages_done)
    pieces = min(idle + 1, int(left))
    if pieces < 2:
        return []
    cuts = split_points(slice_.start, oldest, pieces)
    bounds = [slice_.start, *cuts]
    return [Slice(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def run_slices(
    plan: Sequence[Slice],
    fetch: Callable[[Slice], SliceFetch],
    *,
    concurrency: int,
    queue_pages: int | None = None,
    name: str = "slice",
) -> Generator[SlicePage, None, None]:
    """Page every unfinished slice of ``plan`` with ``concurrency`` fetchers (see the module);
    each page is yielded with the plan that holds once it is stored. ``fetch(slice)`` requests one
    page of the slice from its ``after``. An error in a fetch is raised to the consumer after the
    pages before it; closing the generator stops the fetchers after their current request."""
    consumer = _Plan({i: s for i, s in enumerate(plan)})
    if consumer.finished():
        return
    ids = itertools.count(len(consumer.slices))
    work: queue.Queue[tuple[int, Slice] | None] = queue.Queue()
    handover: queue.Queue[_Message | tuple[object, BaseException | None]] = queue.Queue(
        maxsize=queue_pages or 2 * concurrency
    )
    stop = threading.Event()
    lock = threading.Lock()
    busy = [0]
    for slice_id, s in consumer.slices.items():
        if not s.done:
            work.put((slice_id, s))

    def idle() -> int:
        with lock:
            return concurrency - busy[0] - work.qsize()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                handover.put(item, timeout=POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def page_through(slice_id: int, current: Slice) -> bool:
        pages = 0
        while not stop.is_set():
            fetched = fetch(current)
            pages += 1
            current = replace(current, after=fetched.after, done=not fetched.more)
            pieces: list[tuple[int, Slice]] = []
            if fetched.more and fetched.oldest is not None:
                split = plan_split(current, fetched.oldest, pages, idle())
                pieces = [(next(ids), s) for s in split]
                if pieces:
                    current = replace(current, start=split[-1].end)
            if not put(_Message(slice_id, fetched, (current.start, current.end), tuple(pieces))):
                return False
            for piece in pieces:  # after the message: the consumer knows a piece before its pages
                work.put(piece)
            if current.done:
                return True
        return False

    def fetcher() -> None:
        try:
            while not stop.is_set():
                try:
                    item = work.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    continue
                if item is None:
                    return
                with lock:
                    busy[0] += 1
                try:
                    if not page_through(*item):
                        return
                finally:
                    with lock:
                        busy[0] -= 1
        except BaseException as exc:  # handed to the consumer, which raises it
            put((_END, exc))

    threads = [
        threading.Thread(target=fetcher, name=f"{name}-{i}", daemon=True)
        for i in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    try:
        while True:
            message = handover.get()
            if not isinstance(message, _Message):
                _, error = message
                if error is not None:
                    raise error
                continue
            before = consumer.slices[message.slice_id]
            start, end = message.bounds
            consumer.slices[message.slice_id] = replace(
                before,
                start=start,
                end=end,
                after=message.fetched.after,
                done=not message.fetched.more,
            )
            for piece_id, piece in message.pieces:
                consumer.slices[piece_id] = piece
            finished = consumer.finished()
            yield SlicePage(message.fetched, consumer.ordered(), finished)
            if finished:
                return
    finally:
        stop.set()
        for _ in threads:
            work.put(None)
        for thread in threads:
            while thread.is_alive():  # a fetcher blocked on a full queue sees ``stop`` in 0.1 s
                thread.join(timeout=0.2)
