"""A page that contradicts the paging is a fault, never the end of the list.

A provider that says "there is more" on an empty page, hands back the page it handed before, or gives
a next cursor equal to the one just used has not listed everything: ending the scan there would
report success over records it never read. Such a request is tried again a few times (a replica
lagging behind, a cache answering) and then the scan fails with :class:`PagingError`, its cursor
left at the last page the caller committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Hashable, Mapping, Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from connectors.errors import ConnectorError
from connectors.http import fetch_ahead, redact_url, require

if TYPE_CHECKING:
    from connectors.http import ProviderClient

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


class LinkedPage(NamedTuple):
    """One page of a list whose body names the next page's URL: its items, the URL that produced
    it, and the next page's URL (None on the last)."""

    items: list[Any]
    url: str
    next: str | None


def body_linked_pages(
    client: ProviderClient,
    source: str,
    first: tuple[str, Any],
    *,
    items: str,
    next_key: str,
    permission: str,
) -> Generator[LinkedPage, None, None]:
    """The pages of a list that names its next page's URL in the body (Twilio's
    ``next_page_uri``, Stripe v2's ``next_page_url``), that URL followed as given: each page checked
    by :class:`PageGuard`, the next one fetched while the caller works on this one
    (``http.fetch_ahead``). ``first``: the first request's path and query parameters. Close the
    generator where the caller may stop early."""

    def next_of(body: Any) -> str | None:
        value = body.get(next_key) if isinstance(body, dict) else None
        return value if isinstance(value, str) and value else None

    def get(request: tuple[str, Any]) -> LinkedPage:
        body, response = client.get_json(request[0], params=request[1], permission=permission)
        url = str(response.request.url)
        listed = require(body, items, source=source, url=url, kind=list)
        return LinkedPage(listed, url, next_of(body))

    def shape(request: Any, page: LinkedPage) -> PageShape:
        ids = [
            item.get("id") or item.get("sid") if isinstance(item, Mapping) else None
            for item in page.items
        ]
        return PageShape(ids, bool(page.next), (page.next, None), redact_url(page.url))

    guard = PageGuard(source, shape, sleep=client.pause)
    fetched = fetch_ahead(
        lambda request: guard.fetch(get, request),
        first,
        lambda page: (page.next, None) if page.next else None,
    )
    with closing(fetched):
        yield from fetched
