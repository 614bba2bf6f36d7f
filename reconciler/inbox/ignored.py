"""Events nobody handles: marked ignored by the worker, and said in the log sparingly."""

from __future__ import annotations

import logging

from reconciler.inbox.handlers import Event

log = logging.getLogger("reconciler.inbox.worker")
MAX_KEYS = 1000  # (source, type) pairs counted for the log line


class IgnoredLog:
    """Counts ignored events by source and type; says so the first time for each, then at 10, 100,
    1000 and every 10,000 (``hookledger_inbox_events`` counts them all)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], int] = {}

    def note(self, event: Event) -> None:
        key = (event.source, event.event_type or "")
        seen = self._seen.get(key, 0) + 1
        if len(self._seen) < MAX_KEYS or key in self._seen:
            self._seen[key] = seen
        if seen in (1, 10, 100, 1000) or seen % 10_000 == 0:
            log.warning(
                "%d %s event(s) of type '%s' marked ignored by this worker: no handler and no "
                "forward_url for them (a handler module in [worker] handlers, or forward_url)",
                seen,
                event.source,
                key[1],
                extra={"source": event.source, "event_id": event.event_id},
            )
