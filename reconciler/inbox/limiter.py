"""A fixed-window allowance per client address (pure: the caller passes the time).

Bounds how many rejected deliveries for unknown sources one client can have written to the
``deliveries`` table each minute; the rest are counted in a metric and summarised in the log once a
minute. The table of addresses is bounded too: once it is full, new addresses get no allowance
until the window turns.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60.0
MAX_CLIENTS = 10_000


class PerClientLimiter:
    def __init__(
        self, per_window: int, *, max_clients: int = MAX_CLIENTS, what: str = "unknown sources"
    ) -> None:
        self.per_window = per_window
        self.what = what
        self.max_clients = max_clients
        self._window_start: float | None = None
        self._used: dict[str, int] = {}
        self.dropped = 0  # in the current window

    def allow(self, client: str, now: float) -> bool:
        if self._window_start is None or now - self._window_start >= WINDOW_SECONDS:
            self._turn(now)
        used = self._used.get(client)
        if used is None and len(self._used) >= self.max_clients:
            self.dropped += 1
            return False
        if (used or 0) >= self.per_window:
            self.dropped += 1
            return False
        self._used[client] = (used or 0) + 1
        return True

    def _turn(self, now: float) -> None:
        if self.dropped:
            log.warning(
                "%d rejected deliveries for %s were counted but not stored in the last minute "
                "(over %d per client address)",
                self.dropped,
                self.what,
                self.per_window,
            )
        self._window_start = now
        self._used.clear()
        self.dropped = 0
