"""Chargebee's events, read to reconcile its webhooks (``kind = "chargebee"``).

Facts, each with its source:

- **Endpoint.** ``GET https://{site}.chargebee.com/api/v2/events`` ("URL Format",
  https://apidocs.chargebee.com/docs/api/events/list-events); one event is ``GET /api/v2/events/{id}``,
  answered ``{"event": {...}}``. The list answers ``{"list": [{"event": {...}}, …], "next_offset":
  "…"}`` (chargebee 3.29.0 ``models/event/responses.py``: ``ListResponse.list`` of
  ``ListEventResponse.event``, ``next_offset``; ``RetrieveResponse.event``).
- **Site.** The site is the API's host name and nothing else: the library builds
  ``{protocol}://{site}.{chargebee_domain}/api/v2`` (``environment.py``). A source names it with
  ``base_url = "https://{site}.chargebee.com"`` (required to reconcile; ``/api/v2`` may be left out):
  one key, the one every kind already has, rather than a ``site`` key that ``base_url`` would then
  have to override for a proxy or the sandbox.
- **Paging.** ``limit`` 1 to 100, default 10; ``offset`` = the last answer's ``next_offset``, which
  "is returned only if more resources are present" (https://apidocs.chargebee.com/docs/api/list-ops,
  and ``limit`` ``maximum: 100`` in chargebee/openapi ``spec/chargebee_api_v1_spec.yaml``).
- **Order and time filter.** ``sort_by[asc]=occurred_at`` (oldest first) and
  ``occurred_at[after]=<Unix seconds>`` (chargebee 3.29.0 ``Event.ListParams``: ``occurred_at:
  TimestampFilter`` (after, before, on, between), ``sort_by: SortFilter`` (asc, desc); the list-events
  page's "Filter Params"). ``after`` is read as strictly after, so a scan asks one second earlier.
- **Retention.** Not documented for the API. Events "older than 90 days will not be visible in the
  UI" (https://chargebee.com/docs/1.0/site-configuration/articles-and-faq/can-i-filter-events-for-a-specific-customer-using-api.html):
  hookledger counts 90 days, so a window reaching further is said to, never assumed complete.
- **Auth.** HTTP Basic, the API key as the user name and no password (chargebee 3.29.0
  ``http_request._basic_auth_str``: ``base64("{api_key}:")``); a "Read-only: All" key is enough
  (https://chargebee.com/docs/2.0/api_keys.html, "Read-only key").
- **Rate limit.** 150 requests a minute on a test site and on the Starter plan (more on others);
  beyond it 429, ``"type": "operation_failed"``, ``"api_error_code": "api_request_limit_exceeded"``
  (https://www.chargebee.com/docs/billing/2.0/kb/platform/what-are-the-chargebee-api-limits; the
  error's shape: chargebee/openapi ``components/schemas/429``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from connectors.base import Record
from connectors.budget import BudgetSettings
from connectors.errors import ConfigError
from connectors.event_list import Call, EventList, event_time, text
from connectors.options import SourceOptions
from connectors.provider import ClientFactory

API_PATH = "/api/v2"
# 150 requests a minute (2.5 a second) on the smallest plan and on test sites: a scan takes 1.5
BUDGET = BudgetSettings(rate=1.5, concurrency=1)


def api_root(base_url: str) -> str:
    """``https://acme.chargebee.com`` (``/api/v2`` given or not) as the API's root."""
    root = base_url.rstrip("/")
    return root[: -len(API_PATH)] if root.endswith(API_PATH) else root


def rule(values: Mapping[str, Any]) -> str | None:
    """A reconciled Chargebee source names its site (receiving needs none)."""
    if values.get("api_key_env") and not values.get("base_url"):
        return (
            "key 'base_url' is needed with api_key_env: your Chargebee site's address, "
            '"https://<site>.chargebee.com" (a test site\'s ends in -test)'
        )
    return None


def subject(event: Mapping[str, Any]) -> str | None:
    """The resource an event is about: the content's resource that its type names
    (``subscription_created`` -> ``subscription``; ``payment_source_added`` -> ``payment_source``),
    else the content's first one (``payment_succeeded`` -> its ``transaction``)."""
    content = event.get("content")
    if not isinstance(content, Mapping) or not content:
        return None
    kinds = [k for k, v in content.items() if isinstance(k, str) and isinstance(v, Mapping)]
    event_type = event.get("event_type")
    if isinstance(event_type, str):
        named = [k for k in kinds if event_type.startswith(f"{k}_")]
        if named:
            return max(named, key=len)
    return kinds[0] if kinds else None


class ChargebeeEvents(EventList):
    provider_name = "Chargebee"
    items_path = "list"
    id_path = "event.id"
    retention_days = 90  # the only horizon Chargebee states (its web interface's)
    permission = 'an API key that reads events (a "Read-only: All" key is enough)'
    max_page_size = 100

    def first(self, since: datetime, size: int) -> Call:
        # whole seconds, strictly after: one second earlier keeps an event at the window's start
        after = int(since.astimezone(UTC).timestamp()) - 1
        return Call(
            f"{API_PATH}/events",
            (("limit", size), ("occurred_at[after]", after), ("sort_by[asc]", "occurred_at")),
        )

    def onward(self, body: Any, url: str, call: Call, items: list[Any]) -> Call | None:
        following = body.get("next_offset")  # body is a mapping: items() read its list
        if not isinstance(following, str) or not following:
            return None  # "returned only if more resources are present"
        kept = tuple((k, v) for k, v in call.params if k != "offset")
        return Call(call.url, (*kept, ("offset", following)))

    def record(self, item: Mapping[str, Any]) -> Record:
        event = item["event"]  # checked: event.id is there, so event is a mapping
        resource = subject(event)
        obj = event["content"][resource] if resource else None
        return Record(
            event_id=str(event["id"]),
            event_type=text(event, "event_type"),
            object_type=resource,
            object_id=text(obj, "id") if isinstance(obj, Mapping) else None,
            occurred_at=_seconds(event.get("occurred_at")),
            object_version=text(obj, "resource_version") if isinstance(obj, Mapping) else None,
            payload=event,
        )

    def event_url(self, event_id: str) -> str:
        return f"{API_PATH}/events/{event_id}"

    def unwrap(self, body: Any) -> Any:
        return body  # GET /events/{id} answers {"event": {...}}, the list's item shape


def _seconds(value: Any) -> datetime | None:
    """``occurred_at``: Unix seconds; anything else (or out of range) is no time."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    try:
        return event_time(value)
    except (OverflowError, OSError, ValueError):
        return None


def build(options: SourceOptions, client: ClientFactory) -> ChargebeeEvents:
    api_key = options.api_key
    if not api_key:
        raise ConfigError(
            f"source '{options.name}': reconciling Chargebee needs 'api_key_env' (an API key that "
            "reads events; a 'Read-only: All' key is enough)"
        )
    if not options.base_url:
        raise ConfigError(f"source '{options.name}': {rule({'api_key_env': True})}")
    return ChargebeeEvents(
        options.name,
        client(api_root(options.base_url), {"Authorization": basic(api_key)}, options.hint()),
        page_size=options.page_size,
    )


def basic(api_key: str) -> str:
    """Chargebee's HTTP Basic: the key as the user name, an empty password."""
    return "Basic " + base64.b64encode(f"{api_key}:".encode()).decode("ascii")
