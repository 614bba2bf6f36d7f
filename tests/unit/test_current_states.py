"""A page's suspect objects are asked of the provider together, within the source's concurrency
(threads and a fake provider: no I/O)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from connectors.errors import UnavailableError
from reconciler.reconcile.lookup import CurrentStates


class SlowProvider:
    """fetch_object answers after ``delay`` seconds and counts how many are asked at once."""

    source = "fake"

    def __init__(self, delay: float, failing: frozenset[str] = frozenset()) -> None:
        self.delay, self.failing = delay, failing
        self.lock = threading.Lock()
        self.in_flight = self.peak = self.asked = 0

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        with self.lock:
            self.in_flight += 1
            self.asked += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            time.sleep(self.delay)
            if object_id in self.failing:
                raise UnavailableError(f"source 'fake': {object_id} unavailable")
            return {"id": object_id, "type": object_type}
        finally:
            with self.lock:
                self.in_flight -= 1


def test_suspects_are_asked_together_up_to_the_sources_concurrency() -> None:
    provider = SlowProvider(0.2)
    keys = [("invoice", f"in_{i}") for i in range(8)]
    started = time.perf_counter()
    answers = CurrentStates(provider, 4).ask(keys)  # type: ignore[arg-type]
    took = time.perf_counter() - started
    assert answers == {k: {"id": k[1], "type": k[0]} for k in keys}
    assert provider.peak == 4  # never more than the source allows at once
    assert took < 8 * 0.2 * 0.75  # two rounds of four, not eight one after another


def test_one_at_a_time_when_the_source_allows_one_and_a_failure_is_that_objects_only() -> None:
    provider = SlowProvider(0.01, failing=frozenset({"in_2"}))
    keys = [("invoice", f"in_{i}") for i in range(4)]
    answers = CurrentStates(provider, 1).ask(keys)  # type: ignore[arg-type]
    assert provider.peak == 1
    assert answers[("invoice", "in_2")] is None  # cannot say: not a divergence confirmed
    assert all(answers[k] is not None for k in keys if k[1] != "in_2")
    other = SlowProvider(0.01, failing=frozenset({"in_2"}))
    together = CurrentStates(other, 4).ask(keys)  # type: ignore[arg-type]
    assert together == answers


def test_two_pages_suspecting_one_object_at_once_share_one_request() -> None:
    """Pages are looked up ahead on threads of their own: an object both suspect is asked once a
    scan, and the second page waits for the first one's answer."""
    provider = SlowProvider(0.1)
    states = CurrentStates(provider, 4)  # type: ignore[arg-type]
    keys = [("invoice", "in_1"), ("invoice", "in_2")]
    answers: list[dict[tuple[str, str], object]] = []
    pages = [threading.Thread(target=lambda: answers.append(states.ask(keys))) for _ in range(3)]
    for page in pages:
        page.start()
    for page in pages:
        page.join()
    assert answers == [{k: {"id": k[1], "type": k[0]} for k in keys}] * 3
    assert provider.asked == 2  # each object once, not once a page
    assert states.ask(keys) == answers[0] and provider.asked == 2  # and never again this scan


def test_the_oldest_answers_are_forgotten_past_what_it_remembers() -> None:
    """A scan keeps a bounded number of current states (each a whole object): the oldest asked goes
    first, and is asked again if a page suspects it again."""
    provider = SlowProvider(0)
    states = CurrentStates(provider, 1, remembered=3)  # type: ignore[arg-type]
    keys = [("invoice", f"in_{i}") for i in range(5)]
    states.ask(keys)
    assert provider.asked == 5
    states.ask(keys[2:])  # the three newest: remembered
    assert provider.asked == 5
    assert states.ask(keys[:1]) == {keys[0]: {"id": "in_0", "type": "invoice"}}
    assert provider.asked == 6  # forgotten, so asked again


def test_a_failure_beyond_the_providers_reaches_every_page_waiting_on_it() -> None:
    """A fault that is not the provider's (a bug, say) is raised on the page that asked and on
    those that waited for its answer, rather than leaving them waiting forever."""

    class Broken(SlowProvider):
        def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
            time.sleep(0.1)
            raise RuntimeError("a bug")

    states = CurrentStates(Broken(0), 4)  # type: ignore[arg-type]
    errors: list[BaseException] = []

    def page() -> None:
        try:
            states.ask([("invoice", "in_1")])
        except RuntimeError as exc:
            errors.append(exc)

    pages = [threading.Thread(target=page) for _ in range(3)]
    for p in pages:
        p.start()
    for p in pages:
        p.join(timeout=5)
    assert not any(p.is_alive() for p in pages)
    assert len(errors) == 3
