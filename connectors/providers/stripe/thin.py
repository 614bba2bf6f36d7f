"""Stripe's v2 thin events, listed to reconcile an event destination with thin payloads
(``kind = "stripe"``, ``payload_style = "thin"``).

Thin events are listed apart from v1 events: ``GET /v2/core/events`` with ``created[gte]`` (an ISO
time), ``types[i]`` (up to 20 names, such as ``v1.invoice.paid``) and ``limit``, the next page's URL
in the body (``next_page_url``, null on the last); ``GET /v2/core/events/{id}`` reads one (the
``stripe`` package's ``v2.core.events`` service; docs/providers.md "Stripe v2 thin events").

A thin event carries its object by reference only (``related_object``): the record's object is the
related object, and a business check compares the business row with the object's **current state**,
read from the API (``Capabilities.snapshots`` is False: there is no snapshot to judge by).

Cursor: ``since`` (the newest ``created`` of the last complete scan) and, during a scan, the next
page's URL and the newest time seen so far; each scan reads again from ``overlap`` before ``since``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from datetime import datetime, timedelta
from typing import Any

from connectors.base import (
    Access,
    Capabilities,
    Connector,
    Cursor,
    Listing,
    Page,
    Record,
    ScanOptions,
    beyond_retention,
)
from connectors.errors import UnsupportedError
from connectors.http import ProviderClient, redact_url, require
from connectors.paging import body_linked_pages
from connectors.parsing import BadPayload, iso_time
from connectors.providers.stripe.records import fetch_stripe_object

EVENTS = "/v2/core/events"
PAGE_SIZE = 100
RETENTION = timedelta(days=30)
PERMISSION = "read access to Events (a restricted key needs 'Events: Read')"


def thin_record(event: Mapping[str, Any]) -> Record:
    related = event.get("related_object")
    related = related if isinstance(related, Mapping) else {}
    created = event.get("created")
    return Record(
        event_id=str(event["id"]),
        event_type=event.get("type") if isinstance(event.get("type"), str) else None,
        object_type=related.get("type") if isinstance(related.get("type"), str) else None,
        object_id=related.get("id") if isinstance(related.get("id"), str) else None,
        occurred_at=iso_time(created),
        object_version=created if isinstance(created, str) else None,
        payload=event,
    )


class StripeThinConnector:
    # the list holds every thin event the destination was sent, GET …/{id} 404s an unknown id, and
    # no record carries its object's state
    capabilities = Capabilities(confirms_event_ids=True, snapshots=False)

    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        event_types: tuple[str, ...] = (),
        account: str | None = None,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self.source = source
        self.client = client
        self.listing = Listing(event_types=event_types, account=account)
        self.event_types = event_types
        self.page_size = min(max(page_size, 1), PAGE_SIZE)

    @property
    def retention(self) -> timedelta | None:
        return RETENTION

    def request_rate(self) -> float | None:
        return self.client.budget.current_rate()

    def close(self) -> None:
        self.client.close()

    def _first(self, since: datetime) -> tuple[str, list[tuple[str, Any]]]:
        params: list[tuple[str, Any]] = [
            ("created[gte]", since.strftime("%Y-%m-%dT%H:%M:%S.000Z")),
            ("limit", self.page_size),
        ]
        params += [(f"types[{i}]", t) for i, t in enumerate(self.event_types)]
        return EVENTS, params

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        pos: dict[str, Any] = {} if options.full else dict(cursor or {})
        stored = iso_time(pos.get("since"))
        since = (stored - options.overlap) if stored else options.now - options.initial_lookback
        gap = beyond_retention(since, options.now, RETENTION, "Stripe")
        if gap is not None:
            since = gap.end
        newest = pos.get("newest") or pos.get("since")
        first: tuple[str, Any] = (pos["next"], None) if pos.get("next") else self._first(since)

        pages = body_linked_pages(
            self.client,
            self.source,
            first,
            items="data",
            next_key="next_page_url",
            permission=PERMISSION,
        )
        with closing(pages):
            for page in pages:
                records = []
                for i, item in enumerate(page.items):
                    where = f"{redact_url(page.url)} (item {i})"
                    require(item, "id", source=self.source, url=where)
                    record = thin_record(item)
                    records.append(record)
                    at = record.occurred_at
                    if at and (newest is None or at > (iso_time(newest) or at)):
                        newest = record.object_version
                cursor_now = (
                    {"since": pos.get("since"), "next": page.next, "newest": newest}
                    if page.next
                    else {"since": newest or since.isoformat()}
                )
                yield Page(
                    tuple(records),
                    cursor_now,
                    done=not page.next,
                    gap=gap,
                    url=redact_url(page.url),
                )
                gap = None
                if not page.next:
                    return

    def fetch_event(self, event_id: str) -> Record:
        body, response = self.client.get_json(f"{EVENTS}/{event_id}", permission=PERMISSION)
        require(body, "id", source=self.source, url=str(response.request.url), kind=str)
        return thin_record(body)

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        """The related object's current state (its v1 URL)."""
        return fetch_stripe_object(self.client, self.source, object_type, object_id)

    def redeliver(self, event_id: str) -> None:
        raise UnsupportedError(
            f"source '{self.source}': Stripe has no API to redeliver an event; backfill it instead"
        )

    def check_access(self) -> Access:
        body, response = self.client.get_json(EVENTS, params=[("limit", 1)], permission=PERMISSION)
        require(body, "data", source=self.source, url=str(response.request.url), kind=list)
        return Access("lists thin events (v2)")


def thin_current(connect: Callable[[], Connector], payload: Any) -> Mapping[str, Any] | None:
    """A v2 thin event (``"object": "v2.core.event"``) names its object in ``related_object`` and
    carries no snapshot (https://docs.stripe.com/event-destinations#thin-events): the object's current
    state, read from the API. A v1 event carries its snapshot in ``data.object``: None."""
    if not (isinstance(payload, Mapping) and payload.get("object") == "v2.core.event"):
        return None
    related = payload.get("related_object")
    kind = related.get("type") if isinstance(related, Mapping) else None
    ident = related.get("id") if isinstance(related, Mapping) else None
    if not (isinstance(kind, str) and kind and isinstance(ident, str) and ident):
        raise BadPayload("the thin event has no related_object with a type and an id")
    return connect().fetch_object(kind, ident)
