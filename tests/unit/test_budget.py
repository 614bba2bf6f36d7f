"""The request budget's arithmetic on a fake clock: token bucket, concurrency, AIMD, provider signals."""

from __future__ import annotations

import threading

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from connectors.budget import DECREASE_HOLD, MIN_RATE, BudgetSettings, RequestBudget


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def budget(
    rate: float | None, concurrency: int = 4, burst: float | None = None
) -> tuple[RequestBudget, FakeClock]:
    clock = FakeClock()
    b = RequestBudget(
        BudgetSettings(rate, concurrency, burst), clock=clock, wall=clock, sleep=clock.sleep
    )
    return b, clock


def test_the_bucket_spends_its_burst_then_paces_at_the_rate() -> None:
    b, clock = budget(10.0, burst=5)
    for _ in range(5):
        b.take()
    assert clock.slept == []  # the burst: at once
    start = clock.now
    for _ in range(20):
        b.take()
    assert clock.now - start == pytest.approx(2.0, rel=0.01)  # then 10 a second


@settings(max_examples=60, deadline=None)
@given(
    rate=st.floats(min_value=0.5, max_value=500),
    burst=st.floats(min_value=1, max_value=50),
    n=st.integers(min_value=1, max_value=300),
)
def test_no_window_ever_holds_more_than_burst_plus_rate_times_its_length(
    rate: float, burst: float, n: int
) -> None:
    b, clock = budget(rate, burst=burst)
    times = []
    for _ in range(n):
        b.take()
        times.append(clock.now)
    for i, t in enumerate(times):
        within = [u for u in times[i:] if u - t <= 1.0]
        assert len(within) <= burst + rate * 1.0 + 1e-6


@settings(max_examples=80, deadline=None)
@given(
    rate=st.floats(min_value=0.5, max_value=100),
    # mostly a client that always has a request to send, with idle pauses of any length
    gaps=st.lists(
        st.one_of(st.just(0.0), st.floats(min_value=0, max_value=3)), min_size=1, max_size=200
    ),
)
@example(rate=10.0, gaps=[0.0] * 30)
def test_at_the_default_burst_no_second_holds_more_than_the_rate_plus_one(
    rate: float, gaps: list[float]
) -> None:
    """Idle moments refill the bucket; a second's worth saved up plus the next second's pace would
    be twice the rate in one sliding second, which a provider counting that way refuses."""
    b, clock = budget(rate)
    times = []
    for gap in gaps:
        clock.now += gap
        b.take()
        times.append(clock.now)
    for i, t in enumerate(times):
        within = [u for u in times[i:] if u - t < 1.0]
        assert len(within) <= rate + 1 + 1e-6


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(
        st.one_of(st.just(0.0), st.floats(min_value=0, max_value=2)), min_size=1, max_size=400
    )
)
@example(gaps=[0.0] * 60)
@example(gaps=[0.0] * 30 + [1.5] + [0.0] * 30)
def test_stripes_default_budget_is_never_refused_by_its_sandbox_window(gaps: list[float]) -> None:
    """Stripe's default budget against Stripe's sandbox limit (25 in any sliding second), with idle
    moments of any length between requests."""
    from connectors.registry import provider
    from connectors.sandbox.common import CallWindow

    clock = FakeClock()
    b = RequestBudget(provider("stripe").budget, clock=clock, wall=clock, sleep=clock.sleep)
    window = CallWindow(25)
    for gap in gaps:
        clock.now += gap
        b.take()
        assert window.admit(clock.now) == 0.0


@settings(max_examples=60, deadline=None)
@given(
    rate=st.integers(min_value=1, max_value=50),
    arrivals=st.lists(st.floats(min_value=0, max_value=0.5), min_size=1, max_size=300),
)
def test_the_sandbox_window_admits_at_most_rate_calls_in_any_sliding_second(
    rate: int, arrivals: list[float]
) -> None:
    from connectors.sandbox.common import CallWindow

    window, now, admitted = CallWindow(rate), 0.0, []
    for gap in arrivals:
        now += gap
        if window.admit(now) == 0.0:
            admitted.append(now)
    for i, t in enumerate(admitted):
        assert len([u for u in admitted[i:] if u - t < 1.0]) <= rate


def test_no_limit_takes_at_once_and_counts() -> None:
    b, clock = budget(None)
    for _ in range(1000):
        b.take()
    assert clock.slept == [] and b.stats.requests == 1000


def test_a_refusal_halves_the_rate_pauses_everyone_and_successes_win_it_back() -> None:
    b, clock = budget(20.0, burst=1)
    b.take()
    b.throttled(retry_after=2.0)
    assert b.rate == 10.0 and b.stats.throttled == 1
    before = clock.now
    b.take()
    assert clock.now - before >= 2.0  # the provider's Retry-After, for every request
    for _ in range(10_000):
        b.succeeded({})
    assert b.rate == 20.0  # additive increase, never above the configured ceiling


def test_repeated_refusals_never_take_the_rate_below_its_floor() -> None:
    b, clock = budget(20.0)
    for _ in range(50):
        b.throttled(None)
        clock.now += DECREASE_HOLD
    assert b.rate == MIN_RATE


def test_the_refusals_of_requests_already_in_flight_halve_the_rate_once() -> None:
    b, clock = budget(20.0)
    for _ in range(8):  # eight requests out when the limit was reached: eight 429s at once
        b.throttled(retry_after=1.0)
    assert b.rate == 10.0 and b.stats.throttled == 8
    clock.now += 1.0 + DECREASE_HOLD  # a refusal after the pause and its hold: a new event
    b.throttled(None)
    assert b.rate == 5.0


def test_an_unlimited_budget_learns_a_ceiling_from_the_first_refusal() -> None:
    b, clock = budget(None)
    for _ in range(100):
        b.take()
        clock.now += 0.01  # about 100 a second
    b.throttled(None)
    assert b.rate is not None and b.ceiling is not None and b.rate < b.ceiling


def test_githubs_quota_spreads_what_is_left_above_the_reserve_over_the_time_to_reset() -> None:
    b, clock = budget(100.0)
    reset = str(int(clock.now + 100))
    b.succeeded(
        {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "1500", "x-ratelimit-reset": reset}
    )
    # 1500 left, 1000 kept for the application, 500 over 100 s
    assert b.effective_rate(clock.now) == pytest.approx(5.0)
    b.succeeded(
        {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "900", "x-ratelimit-reset": reset}
    )
    before = clock.now
    b.take()
    assert clock.now - before == pytest.approx(100.0, abs=1)  # only the reserve left: the reset


def test_shopifys_bucket_over_half_full_slows_to_its_leak_rate() -> None:
    b, clock = budget(10.0)
    b.succeeded({"x-shopify-shop-api-call-limit": "10/40"})
    assert b.effective_rate(clock.now) == 10.0
    b.succeeded({"x-shopify-shop-api-call-limit": "30/40"})
    assert b.effective_rate(clock.now) == 2.0
    clock.now += 60  # drained meanwhile
    assert b.effective_rate(clock.now) == 10.0


def test_shopify_graphql_cost_reads_as_a_bucket() -> None:
    b, clock = budget(None)
    b.graphql_cost(available=100, maximum=1000, restore_rate=50)
    assert b.effective_rate(clock.now) == 50


def test_shopify_graphql_cost_paces_requests_by_their_cost() -> None:
    # 100 points a second and 250 points a page: 0.4 pages a second once the bucket is half spent
    b, clock = budget(None)
    b.graphql_cost(available=1500, maximum=2000, restore_rate=100, cost=250)
    assert b.effective_rate(clock.now) is None  # a quarter spent: no signal yet
    b.graphql_cost(available=900, maximum=2000, restore_rate=100, cost=250)
    assert b.effective_rate(clock.now) == pytest.approx(0.4)


@pytest.mark.parametrize("bad", [{"rate": 0.0}, {"rate": -1.0}, {"concurrency": 0}])
def test_settings_refuse_nonsense(bad: dict[str, float]) -> None:
    values = {"rate": 1.0, "concurrency": 1, **bad}
    with pytest.raises(ValueError):
        BudgetSettings(values["rate"], int(values["concurrency"]))


def test_unreadable_headers_change_nothing() -> None:
    b, clock = budget(10.0)
    b.succeeded(
        {"x-ratelimit-limit": "x", "x-ratelimit-remaining": "", "x-ratelimit-reset": "soon"}
    )
    b.succeeded({"x-shopify-shop-api-call-limit": "a/b"})
    b.succeeded(
        {"x-ratelimit-limit": "10", "x-ratelimit-remaining": "5", "x-ratelimit-reset": "nan?"}
    )
    assert b.effective_rate(clock.now) == 10.0


def test_no_more_than_concurrency_requests_are_in_flight() -> None:
    b = RequestBudget(BudgetSettings(None, 3))
    inside, peak = [0], [0]
    lock = threading.Lock()
    gate = threading.Event()

    def request() -> None:
        with b.slot():
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            gate.wait(0.05)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=request) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 3
