"""GoCardless's events, read to reconcile its webhooks (``kind = "gocardless"``).

Facts, each with its source:

- **Endpoint.** ``GET /events`` on ``https://api.gocardless.com`` (sandbox:
  ``https://api-sandbox.gocardless.com``), "a cursor-paginated list of your events"; one event is
  ``GET /events/{id}``, wrapped as ``{"events": {...}}``. gocardless-pro 3.22.0
  ``services/events_service.py`` (``list``, ``all``, ``get``) and ``client.py``
  (``_environment_url``); https://developer.gocardless.com/api-reference/#core-endpoints-events.
- **Paging.** ``limit`` (default 50, at most 500), ``after``/``before`` cursors; the answer is
  ``{"events": [...], "meta": {"cursors": {"before": …, "after": …}, "limit": 50}}`` and "if after
  equals a null value, then you have reached the end of the results"
  (https://support.gocardless.com/hc/en-ca/articles/115003823249-Cursor-pagination). The SDK's
  ``Paginator`` sends the same query again with ``after`` = ``meta.cursors.after`` until it is null.
- **Order.** Newest first (reverse chronological): GoCardless's list convention, as summarised from
  https://developer.gocardless.com/api-reference/#making-requests-pagination; the events page
  itself does not restate it.
- **Time filter.** ``created_at[gt]``, ``[gte]``, ``[lt]``, ``[lte]`` (ISO 8601 date-times): the
  scan asks ``created_at[gte]`` = its window's start, so every page is inside the window.
  gocardless-nodejs ``src/services/eventService.ts`` (``created_at?: CreatedAtFilter``).
- **Late listing.** "Event creation is an asynchronous process, so it can take some time between an
  action occurring and its corresponding event getting included in API responses" (gocardless-pro-java
  ``services/EventService.java``): each scan starts ``[reconcile] overlap_seconds`` before the last
  one's newest event, which covers that delay.
- **Retention.** "This endpoint will no longer return events older than 18 months … no sooner than
  1 August 2026 in sandbox environments, and no sooner than 1 October 2026 in live environments"
  (gocardless-pro 3.22.0 ``EventsService.list`` docstring). 18 months is counted short (545 days),
  so a window that may reach past it is said to.
- **Auth.** ``Authorization: Bearer <access token>`` (a read-only token is enough:
  https://support.gocardless.com/hc/en-gb/articles/17144828748444-How-to-create-an-access-token)
  and ``GoCardless-Version: 2015-07-06`` on every request (gocardless-pro ``api_client.py``
  ``_default_headers``; https://developer.gocardless.com/api-reference/#making-requests-versioning).
- **Rate limit.** 1,000 requests a minute, beyond it 429 (``invalid_api_usage``,
  ``rate_limit_exceeded``) with ``RateLimit-Limit``/``-Remaining``/``-Reset`` headers
  (https://developer.gocardless.com/api-reference/#making-requests-rate-limiting; the SDK's
  ``rate_limit.py`` reads those three headers). The figure was read in secondary sources only.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from connectors.base import Record
from connectors.budget import BudgetSettings
from connectors.errors import ConfigError
from connectors.event_list import Call, EventList, text
from connectors.options import SourceOptions
from connectors.parsing import iso_time, json_path_get
from connectors.provider import ClientFactory

DEFAULT_BASE_URL = "https://api.gocardless.com"  # its sandbox: https://api-sandbox.gocardless.com
API_VERSION = "2015-07-06"  # the only version of GoCardless's current API
# 1,000 requests a minute (16.7 a second) an account: a scan takes under half, the rest is the
# application's (creating payments and mandates)
BUDGET = BudgetSettings(rate=8.0, concurrency=1)


def singular(resource_type: str | None) -> str | None:
    """``payments`` -> ``payment``: the ``links`` key naming an event's object."""
    if not resource_type:
        return None
    return resource_type[:-1] if resource_type.endswith("s") else resource_type


def since_param(at: datetime) -> str:
    """A ``created_at`` filter's value, in GoCardless's own timestamp form."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class GoCardlessEvents(EventList):
    provider_name = "GoCardless"
    items_path = "events"
    retention_days = 545  # 18 months, at their shortest
    permission = "an access token (read-only access is enough)"
    max_page_size = 500

    def first(self, since: datetime, size: int) -> Call:
        return Call("/events", (("created_at[gte]", since_param(since)), ("limit", size)))

    def onward(self, body: Any, url: str, call: Call, items: list[Any]) -> Call | None:
        cursors = json_path_get(body, "meta.cursors")
        after = cursors.get("after") if isinstance(cursors, Mapping) else None
        if not isinstance(after, str) or not after:
            return None  # "if after equals a null value, then you have reached the end"
        kept = tuple((k, v) for k, v in call.params if k != "after")
        return Call(call.url, (*kept, ("after", after)))

    def record(self, item: Mapping[str, Any]) -> Record:
        resource = text(item, "resource_type")
        action = text(item, "action")
        link = singular(resource)
        # the type as the receiver names it: payments.confirmed, mandates.cancelled
        event_type = f"{resource}.{action}" if resource and action else action
        return Record(
            event_id=str(item["id"]),
            event_type=event_type,
            object_type=resource,
            object_id=text(item, f"links.{link}") if link else None,
            occurred_at=iso_time(item.get("created_at")),  # always ISO 8601 text
            object_version=text(item, "created_at"),
            payload=item,
        )

    def event_url(self, event_id: str) -> str:
        return f"/events/{event_id}"

    def unwrap(self, body: Any) -> Any:
        return body.get("events") if isinstance(body, Mapping) else body


def build(options: SourceOptions, client: ClientFactory) -> GoCardlessEvents:
    if not options.api_key:
        raise ConfigError(
            f"source '{options.name}': reconciling GoCardless needs 'api_key_env' (an access "
            "token; read-only access is enough)"
        )
    return GoCardlessEvents(
        options.name,
        client(
            options.base_url or DEFAULT_BASE_URL,
            {"Authorization": f"Bearer {options.api_key}", "GoCardless-Version": API_VERSION},
            options.hint(),
        ),
        page_size=options.page_size,
    )
