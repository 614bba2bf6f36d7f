"""Which events claimed after their lease ran out may run again (inbox.attempts): pure, no database."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from reconciler.config import WorkerSettings
from reconciler.inbox.attempts import Attempts
from reconciler.inbox.handlers import Event

CFG = WorkerSettings.model_validate({"max_attempts": 3, "max_hangs": 2})


def attempts() -> Attempts:
    engine: Any = None  # never reached: the rule reads no database
    return Attempts(engine, CFG, "w1", lambda: datetime(2026, 1, 1, tzinfo=UTC), random.Random(0))


def event(i: int, attempt: int = 1, hangs: int = 0) -> Event:
    e = Event(i, "s", f"evt_{i}", "t", None, None, None, b"{}", None, {}, attempt, "c")
    return replace(e, hangs=hangs)


def test_an_event_whose_lease_did_not_run_out_always_runs() -> None:
    a = attempts()
    assert a.lost_to_a_hang(event(1, attempt=3, hangs=5)) is None


def test_a_lease_run_out_on_the_last_attempt_ends_it_dead() -> None:
    a = attempts()
    a.claimed({1})
    lost = a.lost_to_a_hang(event(1, attempt=3))
    assert lost is not None and lost[1] is False and "after the last attempt" in str(lost[0])
    assert a.lost_to_a_hang(event(1, attempt=3)) is None  # asked once: the claim is spent


def test_too_many_attempts_that_never_came_back_end_it_as_hung() -> None:
    a = attempts()
    a.claimed({1, 2})
    lost = a.lost_to_a_hang(event(1, attempt=2, hangs=2))
    assert lost is not None and lost[1] is True and "max_hangs = 2" in str(lost[0])
    assert a.lost_to_a_hang(event(2, attempt=2, hangs=1)) is None  # its worker died: it runs again
