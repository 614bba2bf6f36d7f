"""A source's request budget: how fast and how many at once every request of one source may go.

A token bucket (``rate`` requests a second, ``burst`` at most saved up: one request unless a provider
says its limiter allows bursts) and a cap on requests in flight, shared by all of a connector's requests: a scan's slices, its look-ups of current state,
its per-record requests. The rate follows the provider with AIMD, the rule TCP uses to share a link:
each request that goes through adds ``rate_step`` (up to the configured ``ceiling``), each one the
provider refuses (429, GitHub's 403 with ``x-ratelimit-remaining: 0``, Shopify's THROTTLED) halves
the rate and pauses everyone until the provider's ``Retry-After`` has passed. So a run shares the
provider's limit with the application's own traffic and backs off when it is reached, instead of
spending the limit and leaving the application the 429s.

Beyond refusals it reads what a provider says about its remaining allowance before refusing:

- GitHub ``x-ratelimit-limit`` / ``-remaining`` / ``-reset`` (an hourly quota): the rate becomes what
  is left above a reserve for the application, spread over the time to the reset.
- Shopify ``X-Shopify-Shop-Api-Call-Limit: used/size`` (REST) and GraphQL's ``throttleStatus``
  (``currentlyAvailable`` of ``maximumAvailable``, ``restoreRate`` a second): over half the bucket
  used, the rate falls to the bucket's leak rate, so the bucket never fills.

Pure of I/O: the clock and the sleep are given (tests pass a fake clock).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

# Of a quota the provider reports (GitHub's hourly one), the part left to the application's own
# requests: the scan spreads the rest over the time to the reset and never touches this part.
RESERVE_SHARE = 0.2
# Shopify's bucket: past this share used, requests go at the leak rate only.
BUCKET_HIGH_WATER = 0.5
MIN_RATE = 0.2  # requests a second: where multiplicative decrease stops
# Refusals within this long after a decrease (beyond the pause it asked for) are the same event: the
# requests in flight when the first 429 came back. TCP likewise halves once per round trip, not
# once per lost packet.
DECREASE_HOLD = 1.0


@dataclass(frozen=True)
class BudgetSettings:
    """A source's budget as configured: ``rate`` None means no client-side limit (the provider's
    signals still apply)."""

    rate: float | None
    concurrency: int
    # tokens the bucket can save (default one): a provider counting requests in any sliding second
    # (Stripe) refuses what a saved second's worth plus the next second's rate would send in one
    burst: float | None = None

    def __post_init__(self) -> None:
        if self.rate is not None and self.rate <= 0:
            raise ValueError("rate must be positive (None: no limit)")
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")


@dataclass
class BudgetStats:
    """What the budget saw (read by the progress display and the benchmark)."""

    requests: int = 0
    throttled: int = 0  # requests the provider refused for the rate
    waited_seconds: float = 0.0  # time spent waiting for a token or a pause
    started_at: float | None = None
    recent: list[float] = field(default_factory=list)  # send times within the last window

    def rate(self, now: float, window: float = 5.0) -> float:
        """Requests a second over the last ``window`` seconds (or since the first request)."""
        cut = now - window
        times = [t for t in self.recent if t >= cut]
        if not times:
            return 0.0
        span = max(now - max(cut, self.started_at or cut), 1e-3)
        return len(times) / span


class RequestBudget:
    """Every request of a source goes through :meth:`slot` (see the module)."""

    def __init__(
        self,
        settings: BudgetSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        rate_step: float | None = None,
    ) -> None:
        self.settings = settings
        self.ceiling = settings.rate  # None: unlimited until the provider says otherwise
        self.rate = settings.rate
        self.burst = settings.burst if settings.burst is not None else 1.0
        # additive increase: back to the ceiling from half of it in about ten seconds of traffic
        self.rate_step = rate_step if rate_step is not None else max(0.05, (self.rate or 10) / 200)
        self._clock, self._wall, self._sleep = clock, wall, sleep
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(settings.concurrency)
        self._tokens = self.burst
        self._refilled = clock()
        self._paused_until = 0.0
        self._held_until = float("-inf")  # refusals before this do not decrease again
        self._signal_rate: float | None = None  # what the provider's headers allow now
        self._signal_until = 0.0
        self.stats = BudgetStats()

    @property
    def concurrency(self) -> int:
        return self.settings.concurrency

    # -- taking a turn -------------------------------------------------------------------------

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the ``concurrency`` places and one token for the length of a request."""
        with self._slots:
            self.take()
            yield

    def take(self) -> None:
        """Wait for a token (and for any pause the provider asked for)."""
        while True:
            with self._lock:
                wait = self._try_take()
            if wait <= 0:
                return
            self.stats.waited_seconds += wait
            self._sleep(wait)

    def _try_take(self) -> float:
        """Take a token now (0) or say how long to wait for one (locked)."""
        now = self._clock()
        if now < self._paused_until:
            return self._paused_until - now
        rate = self.effective_rate(now)
        if rate is None:
            self._count(now)
            return 0.0
        self._tokens = min(self.burst, self._tokens + (now - self._refilled) * rate)
        self._refilled = now
        if self._tokens >= 1.0 - 1e-9:  # (a refill's rounding must not leave a token short)
            self._tokens = max(0.0, self._tokens - 1.0)
            self._count(now)
            return 0.0
        return max(1e-4, (1.0 - self._tokens) / rate)

    def _count(self, now: float) -> None:
        stats = self.stats
        stats.requests += 1
        if stats.started_at is None:
            stats.started_at = now
        stats.recent.append(now)
        if len(stats.recent) > 4096:  # a bounded history: the last few seconds are what is read
            del stats.recent[:2048]

    def effective_rate(self, now: float) -> float | None:
        """The rate in force: AIMD's, lowered to what the provider's last signal allows."""
        signal = self._signal_rate if now < self._signal_until else None
        if signal is None:
            return self.rate
        return signal if self.rate is None else min(self.rate, signal)

    def current_rate(self) -> float:
        """Requests a second actually sent lately (for progress display)."""
        with self._lock:
            return self.stats.rate(self._clock())

    # -- what the provider said ----------------------------------------------------------------

    def succeeded(self, headers: Mapping[str, str] | None = None) -> None:
        """A request went through: additive increase, and the provider's allowance read."""
        with self._lock:
            if self.rate is not None and self.ceiling is not None:
                self.rate = min(self.ceiling, self.rate + self.rate_step)
            if headers:
                self._read_signals(headers)

    def throttled(self, retry_after: float | None) -> None:
        """The provider refused a request for the rate: multiplicative decrease, and everyone
        waits out ``retry_after`` (seconds) if it said."""
        with self._lock:
            now = self._clock()
            self.stats.throttled += 1
            if retry_after:
                self._paused_until = max(self._paused_until, now + retry_after)
            self._tokens = min(self._tokens, 0.0)
            if now < self._held_until:
                return
            base = self.rate if self.rate is not None else max(self.stats.rate(now), MIN_RATE * 2)
            self.rate = max(MIN_RATE, base / 2)
            if self.ceiling is None:  # learnt: the provider's limit is below what was sent
                self.ceiling = base
            self._held_until = max(now, self._paused_until) + DECREASE_HOLD

    def graphql_cost(
        self, available: float, maximum: float, restore_rate: float, cost: float = 1.0
    ) -> None:
        """Shopify GraphQL's ``throttleStatus``: query cost points, restored at ``restore_rate`` a
        second, of which a request spends ``cost`` (its requested cost) — so past the high-water
        mark requests go at ``restore_rate / cost`` a second."""
        with self._lock:
            self._bucket_signal(maximum - available, maximum, restore_rate / max(cost, 1.0))

    def _read_signals(self, headers: Mapping[str, str]) -> None:
        limit = headers.get("x-ratelimit-limit")
        remaining = headers.get("x-ratelimit-remaining")
        reset = headers.get("x-ratelimit-reset")
        if limit and remaining and reset and limit.isdigit() and remaining.isdigit():
            self._quota_signal(int(limit), int(remaining), reset)
        call_limit = headers.get("x-shopify-shop-api-call-limit")
        if call_limit and "/" in call_limit:
            used, _, size = call_limit.partition("/")
            if used.isdigit() and size.isdigit() and int(size) > 0:
                # Shopify's standard plan leaks 2 calls a second from a 40-call bucket
                self._bucket_signal(int(used), int(size), max(2.0, int(size) / 20))

    def _quota_signal(self, limit: int, remaining: int, reset: str) -> None:
        try:
            seconds_left = max(1.0, float(reset) - self._wall())
        except ValueError:
            return
        spendable = remaining - limit * RESERVE_SHARE
        now = self._clock()
        if spendable <= 0:  # only the application's reserve is left: wait for the reset
            self._paused_until = max(self._paused_until, now + seconds_left)
            return
        self._signal_rate = max(MIN_RATE, spendable / seconds_left)
        self._signal_until = now + seconds_left

    def _bucket_signal(self, used: float, size: float, leak_rate: float) -> None:
        now = self._clock()
        if used >= size * BUCKET_HIGH_WATER:
            self._signal_rate = leak_rate
            self._signal_until = now + used / max(leak_rate, MIN_RATE)
        else:
            self._signal_until = 0.0
