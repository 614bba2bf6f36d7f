"""Deliveries confirmed through the provider's API (GoPay), kept apart from the rest of intake.

Such a delivery carries nothing to verify alone: anyone can send one, and each would cost a call
against the merchant's account while holding a request open. So, for each confirm-kind source:

- a malformed key (the provider's ``confirm_key``: GoPay's payment id) is refused before any call;
- one key is asked about at most once per ``confirm_window_seconds``: requests arriving while it is
  being asked share that answer; a refusal (a payment the provider does not know, its API failing)
  is repeated from memory for the rest of the window; a confirmed key asked again within the window
  is answered 503 with ``Retry-After``, so the provider's retry reads the state afresh rather than
  an answer this gate kept;
- the calls run on ``confirm_concurrency`` threads of the source's own, and at most
  ``confirm_queue`` requests wait for them; beyond, 503 with ``Retry-After`` at once. None of this
  takes the receiver's shared slots (``[receiver] limit_concurrency``) or its default thread pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from connectors.errors import RejectedDelivery
from connectors.webhooks import Verdict, WebhookRequest

# keys remembered at once: the calls a window can hold are bounded by the queue, so this is a
# backstop against a clock that stalls, not a limit that is reached in use
MAX_REMEMBERED = 100_000


class QueueFull(Exception):
    """``confirm_queue`` requests are already waiting: answered 503 with Retry-After."""


@dataclass(frozen=True)
class _Asked:
    at: float
    refused: RejectedDelivery | None  # None: the provider confirmed it


class ConfirmGate:
    """One source's confirmations: the queue they wait in, the calls, the window's memory.

    ``ask`` runs on the event loop; ``confirm`` (the source verifier's, which calls the provider)
    runs on the gate's own threads.
    """

    def __init__(
        self,
        name: str,
        key: Callable[[WebhookRequest], str],
        confirm: Callable[[WebhookRequest], Verdict],
        *,
        queue: int,
        concurrency: int,
        window_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        on_call: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = name
        self._key, self._confirm = key, confirm
        self.queue, self.window = queue, window_seconds
        self._clock, self._on_call = clock, on_call
        self._executor = ThreadPoolExecutor(concurrency, thread_name_prefix=f"confirm-{name}")
        self._waiting = 0
        self._flights: dict[str, asyncio.Future[Verdict]] = {}
        self._asked: OrderedDict[str, _Asked] = OrderedDict()
        self.calls = 0  # calls made to the provider, for metrics and tests

    @property
    def waiting(self) -> int:
        return self._waiting

    @contextlib.contextmanager
    def place(self) -> Iterator[None]:
        """A place in the queue for one request, or :class:`QueueFull` at once."""
        if self._waiting >= self.queue:
            raise QueueFull
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1

    async def ask(self, request: WebhookRequest) -> Verdict:
        """The provider's verdict on the request, or :class:`RejectedDelivery` (a 503 carries
        ``retry_after``)."""
        key = self._key(request)  # malformed: BadPayload, before any call
        now = self._clock()
        self._forget(now)
        asked = self._asked.get(key)
        if asked is not None:
            raise _again(asked, self.window - (now - asked.at))
        flight = self._flights.get(key)
        if flight is None:
            self.calls += 1
            self._on_call()
            flight = asyncio.get_running_loop().run_in_executor(
                self._executor, self._confirm, request
            )
            self._flights[key] = flight
            flight.add_done_callback(lambda done: self._answered(key, done))
        # a waiter that goes away (client disconnect) must not cancel the others' shared call
        return await asyncio.shield(flight)

    def _answered(self, key: str, flight: asyncio.Future[Verdict]) -> None:
        self._flights.pop(key, None)
        if self.window <= 0 or flight.cancelled():
            return
        error = flight.exception()
        if error is not None and not isinstance(error, RejectedDelivery):
            return  # a fault of hookledger's own, not an answer about the key: not remembered
        self._asked[key] = _Asked(self._clock(), error)
        self._asked.move_to_end(key)
        while len(self._asked) > MAX_REMEMBERED:
            self._asked.popitem(last=False)

    def _forget(self, now: float) -> None:
        # answers are remembered in the order they came, so the expired ones are at the front
        while self._asked:
            key, asked = next(iter(self._asked.items()))
            if now - asked.at < self.window:
                break
            del self._asked[key]

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _again(asked: _Asked, left: float) -> RejectedDelivery:
    """The answer to a key asked about within the window, without asking again."""
    wait = max(1, math.ceil(left))
    if asked.refused is None:
        return RejectedDelivery(
            503,
            "confirmed with the provider moments ago: send it again after Retry-After and it is "
            "read afresh",
            retry_after=wait,
        )
    refused = asked.refused
    retry_after = wait if refused.status_code == 503 else refused.retry_after
    return RejectedDelivery(
        refused.status_code, refused.reason + " (answered from memory)", retry_after=retry_after
    )
