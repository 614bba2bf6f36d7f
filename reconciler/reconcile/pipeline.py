"""Pages looked up ahead of the writer, handed back in the order the source listed them.

A run's page goes fetch -> look up -> judge -> write. Fetching is the connector's (a sliced listing
pages several requests at once on its own threads); looking up is mostly waiting (the business
tables, the provider's current state of a suspect object), so up to ``ahead`` pages are looked up
at once on threads of their own. Judging and writing stay on the caller's thread, one page at a time
and in order: the cursor stored with a page still covers exactly the pages stored before it.

Memory stays flat: a page is taken from the connector only while fewer than ``ahead`` wait to be
written. A failure of the source is raised after the pages listed before it; a failed look-up is
raised in its page's turn. Leaving the loop early stops taking pages and closes the connector's
iterator on the thread that iterates it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

P = TypeVar("P")
F = TypeVar("F")
POLL_SECONDS = 0.1


class _End:
    """The feeder is done: the source's failure, if it failed."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


def looked_up(
    pages: Iterator[P], plan: Callable[[P], Callable[[], F]], *, ahead: int
) -> Generator[tuple[P, F], None, None]:
    """Each page with what its look-up found, in the order of ``pages`` (see the module).
    ``plan(page)`` is called as each page is taken, in order, on one thread; the look-up it returns
    runs ahead on any. ``ahead`` 0: on the caller's thread as each page comes."""
    if ahead < 1:
        try:
            for page in pages:
                yield page, plan(page)()
        finally:
            _close(pages)
        return
    handover: queue.Queue[tuple[P, Future[F]] | _End] = queue.Queue(maxsize=ahead)
    stop = threading.Event()
    pool = ThreadPoolExecutor(ahead, thread_name_prefix="look-up")

    def put(item: tuple[P, Future[F]] | _End) -> bool:
        while not stop.is_set():
            try:
                handover.put(item, timeout=POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def feed() -> None:
        try:
            for page in pages:
                if stop.is_set() or not put((page, pool.submit(plan(page)))):
                    return
            put(_End())
        except BaseException as exc:  # the consumer raises it after the pages before it
            put(_End(exc))
        finally:
            _close(pages)

    feeder = threading.Thread(target=feed, name="page-feed", daemon=True)
    feeder.start()
    try:
        while True:
            item = handover.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            page, found = item
            yield page, found.result()
    finally:
        stop.set()
        feeder.join()
        pool.shutdown(wait=True, cancel_futures=True)


def _close(pages: Iterator[object]) -> None:
    """A connector's pages, closed when they are a generator (its request ahead stops then, not
    when the garbage collector gets to it)."""
    close = getattr(pages, "close", None)
    if close is not None:
        close()
