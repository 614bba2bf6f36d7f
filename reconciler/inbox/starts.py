"""When a claimed event's attempt is counted, and how it costs no commit of its own.

An attempt counts when it starts, not when it is claimed: the event's ``attempts`` is raised and
committed before its handler runs. A worker that dies on one event of a batch therefore leaves the
batch's other events as they were, and only the event whose handler keeps killing the process
reaches ``max_attempts``.

A transaction of its own for each start costs a commit an event (a fifth to a third of the worker's
rate, docs/benchmarks.md), so a batch's next event is counted in the current event's outcome
transaction instead, and known started once that commits:

- :meth:`Starts.start` gives an event's count: counted already, or now in a transaction of its own
  (a batch's first event, or one whose predecessor's outcome never committed);
- every outcome transaction is a :meth:`Starts.transaction`, and its status update calls
  :meth:`Starts.count_next` in it;
- :meth:`Starts.unstarted` says which released events were counted this way, to give the count back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from sqlalchemy import Connection, Engine

from reconciler.inbox.handlers import Event

Count = Callable[[Connection, Event], "int | None"]  # the start statement: attempts, None if lost


class Starts:
    """A worker's starts (see the module). ``count``: raise the event's attempts in ``conn`` and
    return them (None: the lease is lost); ``will_run``: whether the event will run when its turn
    comes (not when its last attempt's lease ran out)."""

    def __init__(self, count: Count, will_run: Callable[[Event], bool]) -> None:
        self._count, self._will_run = count, will_run
        self._counted: dict[int, int] = {}  # event id -> attempts, committed
        self._next: Event | None = None  # counted by the next outcome transaction
        self._pending: int | None = None  # its count, until that transaction commits

    def next_is(self, event: Event | None) -> None:
        """The event processed after the current one (None: the batch's last)."""
        self._next = event

    def start(self, engine: Engine, event: Event) -> int | None:
        """The event's attempts with this attempt counted (None: its lease is lost)."""
        attempts = self._counted.pop(event.id, None)
        if attempts is not None:
            return attempts
        with engine.begin() as conn:
            return self._count(conn, event)

    @contextlib.contextmanager
    def transaction(self, engine: Engine) -> Iterator[Connection]:
        """An outcome transaction: the next event's start it counted holds once it commits."""
        self._pending = None
        with engine.begin() as conn:
            yield conn
        if self._next is not None and self._pending is not None:
            self._counted[self._next.id] = self._pending
            self._next = None

    def count_next(self, conn: Connection) -> None:
        """In an outcome transaction: count the next event's start with it."""
        if self._next is not None and self._will_run(self._next):
            self._pending = self._count(conn, self._next)

    def unstarted(self, events: list[Event]) -> set[int]:
        """Of these released events, those whose start was counted (their count goes back)."""
        return {e.id for e in events if self._counted.pop(e.id, None) is not None}

    def __repr__(self) -> str:  # (for a debugger: what is counted)
        return f"Starts(counted={self._counted!r}, next={getattr(self._next, 'id', None)})"
