"""A thin notification's object, read from the provider before its handler runs.

A thin notification names its object and carries no state (Stripe's v2 thin events): the worker
reads the object through the source's connector (its request budget and retries) and hands it to
the handler as ``event.current``.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from connectors.base import Connector
from connectors.errors import ConnectorError, NotFoundError, RejectedDelivery
from connectors.http import RetryPolicy
from reconciler.config import Settings, SourceSettings
from reconciler.errors import HookledgerError, PermanentError, TransientError
from reconciler.inbox.handlers import Event
from reconciler.sources import build_connector, provider

# The look-up retries briefly and leaves the rest to the event's own backoff: its attempt holds the
# event's lease meanwhile
FETCH_POLICY = RetryPolicy(max_attempts=3, base_delay=0.2, max_delay=2.0, max_total_wait=10.0)


class CurrentObjects:
    """The current objects of thin notifications, through one connector per source (built once:
    one HTTP client, one request budget). :meth:`close` closes them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._connectors: dict[str, Connector] = {}
        self._lock = threading.Lock()

    def of(self, event: Event) -> Event:
        """The event with its object as ``event.current`` where it is a thin notification. The
        provider unreachable: a transient failure, retried with backoff; the object gone (404) or
        the notification unreadable: permanent."""
        source = self.settings.source(event.source)
        if source is None:
            return event
        fetch = provider(source.kind).current
        if fetch is None:
            return event
        try:
            payload = event.payload
        except (ValueError, RecursionError):
            return event  # (not a document: nothing to look up; the handler sees the bytes)
        try:
            current = fetch(lambda: self._connector(source), payload)
        except NotFoundError as exc:
            raise PermanentError(
                f"the notification's object is gone at the provider: {exc}"
            ) from exc
        except RejectedDelivery as exc:
            raise PermanentError(f"the notification cannot be read: {exc.reason}") from exc
        except (ConnectorError, HookledgerError) as exc:
            raise TransientError(f"fetching the notification's object failed: {exc}") from exc
        return event if current is None else replace(event, current=current)

    def _connector(self, source: SourceSettings) -> Connector:
        with self._lock:
            if source.name not in self._connectors:
                self._connectors[source.name] = build_connector(source, policy=FETCH_POLICY)
            return self._connectors[source.name]

    def close(self) -> None:
        with self._lock:
            for connector in self._connectors.values():
                connector.close()
            self._connectors.clear()
