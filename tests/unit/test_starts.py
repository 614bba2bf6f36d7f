"""When a claimed event's attempt is counted (inbox.attempts): with the previous event's outcome,
known only once that commits (a fake engine: no database)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from reconciler.inbox.attempts import Starts
from reconciler.inbox.handlers import Event


class FakeEngine:
    """``begin()`` yields a connection id; what each transaction counted, and whether it committed."""

    def __init__(self) -> None:
        self.transactions: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def begin(self) -> Iterator[int]:
        self.transactions.append({"counted": [], "committed": False})
        yield len(self.transactions) - 1
        self.transactions[-1]["committed"] = True


def event(i: int) -> Event:
    return Event(i, "s", f"evt_{i}", "t", None, None, None, b"{}", None, {}, 0, "c")


def starts(engine: FakeEngine, not_running: frozenset[int] = frozenset()) -> Starts:
    attempts: dict[int, int] = {}

    def count(conn: Any, e: Event) -> int:
        attempts[e.id] = attempts.get(e.id, 0) + 1
        engine.transactions[conn]["counted"].append(e.id)
        return attempts[e.id]

    return Starts(count, lambda e: e.id not in not_running)  # type: ignore[arg-type]


def test_the_first_event_counts_alone_and_the_next_with_its_outcome() -> None:
    engine = FakeEngine()
    s = starts(engine)
    first, second = event(1), event(2)
    s.next_is(second)
    assert s.start(engine, first) == 1  # type: ignore[arg-type]
    with s.transaction(engine) as conn:  # type: ignore[arg-type]
        s.count_next(conn)
    assert s.start(engine, second) == 1  # type: ignore[arg-type]  # counted already: no new one
    assert [t["counted"] for t in engine.transactions] == [[1], [2]]


def test_an_outcome_that_never_commits_leaves_the_next_event_to_count_itself() -> None:
    engine = FakeEngine()
    s = starts(engine)
    s.next_is(event(2))
    with pytest.raises(RuntimeError), s.transaction(engine) as conn:  # type: ignore[arg-type]
        s.count_next(conn)
        raise RuntimeError("the outcome's commit failed")
    assert s.start(engine, event(2)) == 2  # type: ignore[arg-type]  # counted again, on its own
    assert engine.transactions[-1] == {"counted": [2], "committed": True}


def test_an_event_that_will_not_run_is_not_counted_ahead_and_a_release_gives_counts_back() -> None:
    engine = FakeEngine()
    s = starts(engine, not_running=frozenset({3}))
    for following in (event(2), event(3)):
        s.next_is(following)
        with s.transaction(engine) as conn:  # type: ignore[arg-type]
            s.count_next(conn)
    assert [t["counted"] for t in engine.transactions] == [[2], []]
    assert s.unstarted([event(2), event(3)]) == {2}
    assert s.unstarted([event(2)]) == set()  # given back once
