"""A provider's list of the events it sent, read over a time window: what most providers' list APIs
have in common (Paddle's ``/events``, GoCardless's, Chargebee's, PayPal's webhook events, …).

A provider module says how its list is asked for and read (:class:`EventList`'s ``first``,
``onward`` and ``record``); this module reads it the same way for all of them:

- **Window.** A scan reads from ``since`` (the newest event time of the last complete scan, less
  ``overlap``; the initial look-back on the first run) up to now. A list the provider cannot filter
  by time (``filters_time`` False) is read newest first and stops at the first event older than
  ``since``; older events on the last page are left out.
- **Retention.** A window that starts before the provider's retention (``retention``) is read from
  the retention's horizon and the run says so: its first page carries a :class:`Gap` (cause
  ``beyond_retention``).
- **Cursor.** ``{"since": …}`` between scans; during one, also the next page's request
  (``next``) and the newest time seen so far, so a run that stops resumes at the page after the
  last committed one.
- **Paging faults.** Every page goes through :class:`connectors.paging.PageGuard`: an empty page
  that says more follows, a page repeated or a next request that does not advance fails the run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from connectors.base import (
    Access,
    Capabilities,
    Cursor,
    Listing,
    Page,
    Record,
    ScanOptions,
    beyond_retention,
)
from connectors.errors import MalformedResponseError, UnsupportedError
from connectors.http import ProviderClient, redact_url
from connectors.paging import PageGuard, PageShape
from connectors.parsing import iso_time, json_path_get


@dataclass(frozen=True)
class Call:
    """One list request, kept in the cursor as JSON (so a scan resumes at its next page)."""

    url: str
    params: tuple[tuple[str, Any], ...] = ()
    body: Mapping[str, Any] | None = None  # a list read as a POST (Square's events search)

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "params": [list(p) for p in self.params], "body": self.body}

    @classmethod
    def from_json(cls, value: Any) -> Call:
        if not isinstance(value, Mapping) or not isinstance(value.get("url"), str):
            raise ValueError(f"not a stored list request: {value!r}"[:200])
        params = tuple((str(k), v) for k, v in value.get("params") or ())
        return cls(value["url"], params, value.get("body"))


def event_time(value: Any) -> datetime | None:
    """A listed event's time: ISO 8601 (``Z`` or an offset) or Unix seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):  # a hostile item's time: no time at all
            return None
    return iso_time(value)


def text(item: Mapping[str, Any], path: str) -> str | None:
    """The value at ``path`` as text (None where absent)."""
    value = json_path_get(item, path)
    return None if value is None or isinstance(value, dict | list) else str(value)


class EventList:
    """The shared reading of a provider's event list; a provider's connector subclasses it."""

    capabilities = Capabilities()
    listing = Listing()
    provider_name = "the provider"
    items_path = "data"  # where a page's events are
    id_path = "id"  # each event's id, required
    filters_time = True  # ``first`` asks for events since a time
    retention_days: float | None = None  # how far back the list reaches (None: no limit known)
    permission = "read access to its events"
    max_page_size = 100

    def __init__(self, source: str, client: ProviderClient, *, page_size: int | None = None):
        self.source = source
        self.client = client
        self.page_size = min(max(page_size or self.max_page_size, 1), self.max_page_size)

    # what a provider says ------------------------------------------------------------------------

    def first(self, since: datetime, size: int) -> Call:
        """The request of the first page: events since ``since``, ``size`` a page."""
        raise NotImplementedError

    def onward(self, body: Any, url: str, call: Call, items: list[Any]) -> Call | None:
        """The request of the page after this one, or None on the last."""
        raise NotImplementedError

    def record(self, item: Mapping[str, Any]) -> Record:
        """One listed event as the record the reconciler compares."""
        raise NotImplementedError

    def event_url(self, event_id: str) -> str:
        """Where one event is read by id."""
        raise UnsupportedError(
            f"source '{self.source}': {self.provider_name}'s API reads no single event by id"
        )

    def unwrap(self, body: Any) -> Any:
        """One event read by id, from its answer (some wrap it: ``{"event": …}``)."""
        return body

    # the shared reading ------------------------------------------------------------------------

    @property
    def retention(self) -> timedelta | None:
        return timedelta(days=self.retention_days) if self.retention_days else None

    def request_rate(self) -> float | None:
        return self.client.budget.current_rate()

    def close(self) -> None:
        self.client.close()

    def fetch(self, call: Call) -> tuple[Any, str]:
        if call.body is not None:
            body, response = self.client.post_json(call.url, call.body, permission=self.permission)
        else:
            body, response = self.client.get_json(
                call.url, params=list(call.params) or None, permission=self.permission
            )
        return body, str(response.request.url)

    def items(self, body: Any, url: str) -> list[Any]:
        listed = json_path_get(body, self.items_path) if self.items_path else body
        if listed is None and isinstance(body, Mapping) and self.items_path not in body:
            listed = [] if self.absent_means_empty(body) else None
        if not isinstance(listed, list):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(url)} has no list at '{self.items_path}'"
            )
        return listed

    def absent_means_empty(self, body: Mapping[str, Any]) -> bool:
        """Whether a page without its list key is an empty page (Mollie leaves it out)."""
        return False

    def checked(self, item: Any, url: str, index: int) -> Record:
        if not isinstance(item, Mapping) or text(item, self.id_path) in (None, ""):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(url)} item {index} has no '{self.id_path}'"
            )
        return self.record(item)

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        pos: dict[str, Any] = {} if options.full else dict(cursor or {})
        stored = iso_time(pos.get("since"))
        since = (stored - options.overlap) if stored else options.now - options.initial_lookback
        gap = beyond_retention(since, options.now, self.retention, self.provider_name)
        if gap is not None:
            since = gap.end
        newest = iso_time(pos.get("newest")) or stored
        call = Call.from_json(pos["next"]) if pos.get("next") else self.first(since, self.page_size)
        read: dict[int, tuple[list[Record], Call | None, str]] = {}

        def shape(request: Call, answer: tuple[Any, str]) -> PageShape:
            body, url = answer
            listed = self.items(body, url)
            records = [self.checked(item, url, i) for i, item in enumerate(listed)]
            following = self.onward(body, url, request, listed)
            read[id(answer)] = (records, following, url)
            return PageShape([r.event_id for r in records], following is not None, following, url)

        guard = PageGuard(self.source, shape, sleep=self.client.pause)
        while True:
            answer = guard.fetch(self.fetch, call)
            records, following, url = read.pop(id(answer))
            if not self.filters_time:
                inside = [r for r in records if not (r.occurred_at and r.occurred_at < since)]
                if len(inside) < len(records):  # newest first: the window ends on this page
                    records, following = inside, None
            times = [r.occurred_at for r in records if r.occurred_at is not None]
            if times and (newest is None or max(times) > newest):
                newest = max(times)
            kept = newest.isoformat() if newest else since.isoformat()
            position = (
                {"since": pos.get("since"), "next": following.to_json(), "newest": kept}
                if following
                else {"since": kept}
            )
            yield Page(
                tuple(records), position, done=following is None, gap=gap, url=redact_url(url)
            )
            gap = None
            if following is None:
                return
            call = following

    def fetch_event(self, event_id: str) -> Record:
        body, response = self.client.get_json(self.event_url(event_id), permission=self.permission)
        url = str(response.request.url)
        return self.checked(self.unwrap(body), url, 0)

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        raise UnsupportedError(
            f"source '{self.source}': hookledger reads no {object_type} from {self.provider_name}"
        )

    def redeliver(self, event_id: str) -> None:
        raise UnsupportedError(
            f"source '{self.source}': {self.provider_name} cannot be asked here to send an event "
            "again; backfill it instead"
        )

    def check_access(self) -> Access:
        """One page of one event from the last day: the request a scan makes."""
        call = self.first(datetime.now(UTC) - timedelta(days=1), 1)
        body, url = self.fetch(call)
        listed = self.items(body, url)
        for i, item in enumerate(listed):  # what it lists is read as a scan reads it
            self.checked(item, url, i)
        return Access(f"lists {self.provider_name}'s events ({redact_url(url)})")
