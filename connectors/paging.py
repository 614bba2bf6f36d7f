"""A page that contradicts the paging is a fault, never the end of the list.

A provider that says "there is more" on an empty page, hands back the page it handed before, or gives
a next cursor equal to the one just used has not listed everything: ending the scan there would
report success over records it never read. Such a request is tried again a few times (a replica
lagging behind, a cache answering) and then the scan fails with :class:`PagingError`, its cursor
left at the last page the caller committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple, TypeVar

from connectors.errors import ConnectorError

T = TypeVar("T")

PAGE_TRIES = 3
RETRY_PAUSE_SECONDS = 0.5


class PagingError(ConnectorError):
    """The provider's paging contradicts itself: the list cannot be read to its end."""


class PageShape(NamedTuple):
    """What the guard needs to know of one fetched page."""

    ids: Sequence[Hashable]  # the records' ids, in order
    more: bool  # the provider says there is a next page
    next: Any  # the request that would fetch it (None when there is none)
    url: str  # the request that produced this page, secrets redacted


def page_fault(
    request: Any, shape: PageShape, previous_ids: tuple[Hashable, ...] | None
) -> str | None:
    """Why this page cannot be trusted, or None (pure)."""
    if shape.more and not shape.ids:
        return "says there is more but the page is empty"
    if shape.ids and previous_ids is not None and tuple(shape.ids) == previous_ids:
        return "repeats the previous page"
    if shape.more and shape.next == request:
        return "gives a next cursor that does not advance"
    return None


class PageGuard:
    """Fetches pages through :func:`page_fault`, retrying a faulty one, then failing the scan."""

    def __init__(
        self,
        source: str,
        shape: Callable[[Any, Any], PageShape],
        *,
        tries: int = PAGE_TRIES,
        pause: float = RETRY_PAUSE_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.source = source
        self._shape = shape
        self._tries = max(1, tries)
        self._pause = pause
        self._sleep = sleep
        self._previous: tuple[Hashable, ...] | None = None

    def fetch(self, fetch: Callable[[Any], T], request: Any) -> T:
        for attempt in range(1, self._tries + 1):
            result = fetch(request)
            shape = self._shape(request, result)
            reason = page_fault(request, shape, self._previous)
            if reason is None:
                self._previous = tuple(shape.ids)
                return result
            if attempt < self._tries:
                self._sleep(self._pause * attempt)
        raise PagingError(
            f"source '{self.source}': {shape.url} {reason} ({self._tries} tries); the scan stops "
            "at the last page it committed"
        )
