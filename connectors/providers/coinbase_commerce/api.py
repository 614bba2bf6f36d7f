"""Coinbase Commerce's events, read to reconcile its webhooks (``kind = "coinbase_commerce"``).

Facts, each with its source:

- **Endpoint.** ``GET https://api.commerce.coinbase.com/events`` ("List events"), ``GET
  /events/{event_id}`` ("Get event"); header ``X-CC-Api-Key`` (required), ``X-CC-Version``
  ("Desired API Version (ex: 2018-03-22)")
  (https://docs.cdp.coinbase.com/api-reference/commerce-api/rest-api/events/list-events);
  coinbase-commerce 1.0.1 (Coinbase's Python library, archived) ``coinbase_commerce/auth.py`` sends
  both, ``client.py`` ``API_VERSION = '2018-03-22'``.
- **Paging.** "All GET endpoints that return an object list support cursor based pagination":
  ``order`` ``asc``/``desc`` (default), ``limit`` "Accepted values: 0 - 100. Default is 25",
  ``starting_after``/``ending_before`` a resource id; "the API constructs the next call into
  ``next_uri`` together with all the currently used pagination parameters. You know that you have
  paginated all the results when the response's ``next_uri`` is empty"; ``pagination`` also carries
  ``total``, ``yielded``, ``limit``, ``cursor_range``
  (https://docs.cloud.coinbase.com/commerce/docs/pagination). The list takes no time filter: a
  scan reads newest first and stops at its window's start.
- **Identity.** An event is ``{"id", "resource": "event", "type", "api_version", "created_at",
  "data"}`` (the webhook's ``event``: https://docs.cdp.coinbase.com/commerce/api-arcitecture/webhooks-fields),
  ``data`` the charge: the same ``id`` the receiver stores from ``event.id``.
- **Retention.** Not documented (none of the pages above names one): ``retention_days`` None unless
  a source sets it.
- **Rate limit.** "200 requests per minute for all other endpoints" (25 on charge creation),
  beyond it 429 ``{"error": {"type": "rate_limit_exceeded", …}}``, no ``Retry-After`` named
  (https://docs.cloud.coinbase.com/commerce/docs/rate-limiting).
- **Deprecation.** "The Commerce Charge API is being deprecated" in favour of Coinbase Business
  (https://docs.cdp.coinbase.com/coinbase-business/payment-link-apis/migrate/overview); no date is
  given there.
- **A charge's current state.** The list filters by nothing: a charge's newest event is found by
  reading it newest first, at most :data:`SEARCH_PAGES` pages.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from connectors.base import Record
from connectors.budget import BudgetSettings
from connectors.errors import ConfigError, MalformedResponseError, NotFoundError
from connectors.event_list import Call, EventList, event_time, text
from connectors.http import ProviderClient, redact_url
from connectors.options import SourceOptions
from connectors.parsing import json_path_get
from connectors.provider import ClientFactory

DEFAULT_BASE_URL = "https://api.commerce.coinbase.com"
API_VERSION = "2018-03-22"  # the version of the webhooks' events (webhooks-fields above)
# 200 requests a minute: a scan keeps to three quarters of it, one at a time
BUDGET = BudgetSettings(rate=2.5, concurrency=1)
SEARCH_PAGES = 5  # pages (of 100) read newest first for a charge's newest event


def object_type(event_type: str | None) -> str | None:
    """``charge:confirmed`` is about a charge."""
    return event_type.partition(":")[0] if event_type else None


def origin(url: str) -> tuple[str, str] | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return (parts.scheme, parts.netloc) if parts.scheme and parts.netloc else None


class CoinbaseCommerceEvents(EventList):
    provider_name = "Coinbase Commerce"
    items_path = "data"
    id_path = "id"
    filters_time = False
    retention_days: float | None = None
    permission = "an API key of the Commerce account"
    max_page_size = 100

    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        page_size: int | None = None,
        retention_days: float | None = None,
    ) -> None:
        super().__init__(source, client, page_size=page_size)
        if retention_days:
            self.retention_days = retention_days

    def first(self, since: datetime, size: int) -> Call:
        return Call("/events", (("order", "desc"), ("limit", size)))

    def onward(self, body: Any, url: str, call: Call, items: list[Any]) -> Call | None:
        following = json_path_get(body, "pagination.next_uri")
        if following in (None, ""):
            return None
        # followed with the API key: a path on the API, or a URL on the host that gave it
        if not isinstance(following, str) or (
            not following.startswith("/") and origin(following) != origin(url)
        ):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(url)} has a next_uri off its own host"
            )
        return Call(following)

    def record(self, item: Mapping[str, Any]) -> Record:
        event_type = text(item, "type")
        return Record(
            event_id=str(item["id"]),
            event_type=event_type,
            object_type=object_type(event_type),
            object_id=text(item, "data.id"),
            occurred_at=event_time(item.get("created_at")),
            object_version=text(item, "created_at"),
            payload=item,
        )

    def event_url(self, event_id: str) -> str:
        return f"/events/{quote(event_id, safe='')}"

    def unwrap(self, body: Any) -> Any:
        return body.get("data") if isinstance(body, Mapping) else body

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        """A charge as it is now: its newest event (what a webhook last said of it)."""
        if object_type != "charge":
            return super().fetch_object(object_type, object_id)
        call: Call | None = Call("/events", (("order", "desc"), ("limit", self.max_page_size)))
        for _ in range(SEARCH_PAGES):
            if call is None:
                break
            body, url = self.fetch(call)
            listed = self.items(body, url)
            for i, item in enumerate(listed):
                if text(item, "data.id") == object_id if isinstance(item, Mapping) else False:
                    return self.checked(item, url, i).payload
            call = self.onward(body, url, call, listed)
        raise NotFoundError(
            f"source '{self.source}': no event of charge {object_id} in Coinbase Commerce's "
            f"newest {SEARCH_PAGES * self.max_page_size} events"
        )


def build(options: SourceOptions, client: ClientFactory) -> CoinbaseCommerceEvents:
    if not options.api_key:
        raise ConfigError(
            f"source '{options.name}': reconciling Coinbase Commerce needs 'api_key_env' (an API "
            "key of the Commerce account)"
        )
    headers = {"X-CC-Api-Key": options.api_key, "X-CC-Version": API_VERSION}
    return CoinbaseCommerceEvents(
        options.name,
        client(options.base_url or DEFAULT_BASE_URL, headers, options.hint()),
        page_size=options.page_size,
        retention_days=options.retention_days,
    )
