"""Square's Events API, read to reconcile its webhooks (``kind = "square"``).

Facts, each with its source:

- **Endpoint.** ``POST /v2/events`` (SearchEvents, beta), a JSON body ``{"cursor", "limit",
  "query": {"filter": {"event_types", "merchant_ids", "location_ids", "created_at":
  {"start_at", "end_at"}}, "sort": {"field": "DEFAULT", "order": "ASC" | "DESC"}}}``; the answer
  ``{"events": [...], "metadata": [...], "cursor": …}`` (``errors`` instead on a failure).
  https://developer.squareup.com/reference/square/events-api/search-events; squareup
  46.0.0.20260916 ``square/events/raw_client.py`` ``search_events`` (``"v2/events"``,
  ``method="POST"``), ``square/requests/search_events_filter.py``, ``search_events_sort.py``.
- **Paging.** ``limit`` 1-100, default 100 ("which is also the maximum allowed value"); the answer's
  ``cursor`` fetches the next page and must be sent "with the original query"; no cursor: the last
  page (same page); "the lifespan of a page cursor is 5 minutes"
  (https://developer.squareup.com/docs/changelog/connect-logs/2022-12-14; the pagination page now
  says only "a limited lifespan": https://developer.squareup.com/docs/build-basics/common-api-patterns/pagination),
  so a scan resumed later whose cursor Square refuses restarts after its last event, by time.
  ``DEFAULT`` sorts by ``created_at``
  (square/square-python-sdk ``legacy/doc/models/search-events-sort-field.md``). The default order
  is not documented, so it is always sent: ``ASC``, the oldest first, the events nearest the
  retention's edge read before they leave it.
- **Retention.** "You can only retrieve events that occurred within the past 28 days"; only events
  that happened while events were *enabled* for the application (``PUT /v2/events/enable``; "All
  events are disabled by default") are searchable.
  https://developer.squareup.com/docs/events-api/overview; ``legacy/doc/api/events.md``.
- **Auth.** ``Authorization: Bearer`` the application's *personal* access token: "you cannot use
  OAuth access tokens with the Events API"; it lists a seller's events the application had OAuth
  access to when they happened (same overview page). ``Square-Version`` pins the API version (the
  SDK sends its own, ``square/core/client_wrapper.py``).
- **Rate limit.** Not published: "we currently do not publicly disclose the rate limits"
  (https://developer.squareup.com/forums/t/current-square-api-rate-limit/449); beyond it
  ``429`` with category ``RATE_LIMIT_ERROR``, code ``RATE_LIMITED``, and no documented
  ``Retry-After`` (https://developer.squareup.com/reference/square/objects/ErrorCategory).
- **One event by id.** No call reads one: the Events API has search, enable, disable and
  list-types only.
- **An object's current state.** ``GET /v2/payments/{id}`` answers ``{"payment": …}``,
  ``GET /v2/refunds/{id}`` ``{"refund": …}``, ``GET /v2/customers/{id}`` ``{"customer": …}``: the
  shape of an event's ``data.object`` (squareup ``payments/raw_client.py`` ``get``,
  ``refunds/raw_client.py`` ``get``, ``customers/raw_client.py`` ``get``;
  ``types/get_payment_response.py``, ``get_payment_refund_response.py``, ``get_customer_response.py``).
  Read with the same personal token, they answer for the application owner's own account: another
  seller's object needs that seller's OAuth token, so its row is judged on the event's snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from connectors.base import Capabilities, Record
from connectors.budget import BudgetSettings
from connectors.errors import ConfigError, ConnectorError, MalformedResponseError
from connectors.event_list import Call, EventList, text
from connectors.http import decode_json, redact_url
from connectors.options import SourceOptions
from connectors.parsing import iso_time
from connectors.provider import ClientFactory

# its sandbox: https://connect.squareupsandbox.com (squareup ``square/environment.py``)
DEFAULT_BASE_URL = "https://connect.squareup.com"
SEARCH_PATH = "/v2/events"
# the version squareup 46.0.0.20260916 sends; the events' own shape is the application's version
# when each happened (the answer's metadata[].api_version), whatever this says
SQUARE_VERSION = "2026-09-16"
# Square publishes no rate limit: two calls a second, one at a time, far below what it answers
BUDGET = BudgetSettings(rate=2.0, concurrency=1)
RESTARTED = "_hookledger_restarted_query"  # kept on an answer read after a lapsed cursor
# where an object's current state is read: the answer is ``{"<type>": …}``, as an event's data.object
# (and the permission it needs: https://developer.squareup.com/docs/oauth-api/square-permissions)
OBJECT_PATHS = {
    "payment": ("/v2/payments/{}", "PAYMENTS_READ"),
    "refund": ("/v2/refunds/{}", "PAYMENTS_READ"),
    "customer": ("/v2/customers/{}", "CUSTOMERS_READ"),
}


def iso(at: datetime) -> str:
    """RFC 3339 in UTC, as Square writes its times."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _read(event: Any, after: tuple[str, str]) -> bool:
    """Whether an event sorts at or before ``after`` (its time, its id): read already."""
    if not isinstance(event, Mapping):
        return False
    at, mark = iso_time(event.get("created_at")), iso_time(after[0])
    if at is None or mark is None:
        return False
    return (at, str(event.get("event_id"))) <= (mark, after[1])


def revision(state: Any) -> str | None:
    """The object's revision as the event shows it: payments carry ``version_token``, customers
    and catalog objects ``version``, the rest only ``updated_at``."""
    if not isinstance(state, Mapping):
        return None
    return next(
        (v for k in ("version_token", "version", "updated_at") if (v := text(state, k))), None
    )


class SquareEvents(EventList):
    # a business check reads ``data.object`` ({"payment": {...}}): what GET /v2/payments/{id} answers
    capabilities = Capabilities(object_path=("data", "object"))
    provider_name = "Square"
    items_path = "events"
    id_path = "event_id"
    filters_time = True
    retention_days = 28
    permission = (
        "the application's personal access token (OAuth tokens are refused), events enabled "
        "with PUT /v2/events/enable"
    )
    max_page_size = 100

    def first(self, since: datetime, size: int) -> Call:
        query = {
            "filter": {"created_at": {"start_at": iso(since)}},
            "sort": {"field": "DEFAULT", "order": "ASC"},
        }
        return Call(SEARCH_PATH, body={"limit": size, "query": query})

    def onward(self, body: Any, url: str, call: Call, items: list[Any]) -> Call | None:
        cursor = body.get("cursor") if isinstance(body, Mapping) else None
        if not isinstance(cursor, str) or not cursor:
            return None
        # Square: "To retrieve additional pages using a cursor, you must use the original query".
        # A POST's params are not sent: they keep where this page ended (oldest first), to start
        # again there if the cursor has lapsed when the call is made
        last = items[-1] if items and isinstance(items[-1], Mapping) else {}
        ended = (("after", text(last, "created_at")), ("after_id", text(last, "event_id")))
        query = body.get(RESTARTED) or (call.body or {}).get("query")
        following = {**(call.body or {}), "query": query, "cursor": cursor}
        return Call(SEARCH_PATH, ended if all(v for _, v in ended) else (), following)

    def fetch(self, call: Call) -> tuple[Any, str]:
        if not call.body or "cursor" not in call.body:
            return super().fetch(call)
        response = self.client.request(
            "POST", call.url, json=call.body, permission=self.permission, expected=(200, 400)
        )
        url = str(response.request.url)
        body = self.answer(response)
        if response.status_code == 200:
            return body, url
        codes = {e.get("code") for e in body.get("errors") or () if isinstance(e, Mapping)}
        kept = dict(call.params)
        if "INVALID_CURSOR" not in codes or not kept.get("after"):
            raise ConnectorError(
                f"source '{self.source}': POST {redact_url(url)} answered HTTP 400: "
                f"{json.dumps(body)[:300]}"
            )
        # the cursor lapsed: the same query from the page's last event on, without it
        query = json.loads(json.dumps((call.body or {}).get("query") or {}))
        query.setdefault("filter", {})["created_at"] = {"start_at": kept["after"]}
        restart = Call(SEARCH_PATH, body={"limit": call.body.get("limit"), "query": query})
        body, url = super().fetch(restart)
        after = (kept["after"], kept.get("after_id") or "")
        events = body.get("events") if isinstance(body, Mapping) else None
        if isinstance(events, list):  # the events up to that one were read on earlier pages
            body = {**body, "events": [e for e in events if not _read(e, after)]}
        # the next cursor belongs to this query: ``onward`` sends it with it
        return {**body, RESTARTED: query} if isinstance(body, Mapping) else body, url

    def answer(self, response: Any) -> Mapping[str, Any]:
        try:
            body = decode_json(response.content)
        except (UnicodeDecodeError, ValueError):
            body = None
        if not isinstance(body, Mapping):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(response.request.url)} did not return a "
                "JSON object"
            )
        return body

    def absent_means_empty(self, body: Mapping[str, Any]) -> bool:
        # Square leaves empty fields out: no match is ``{}``; a failure carries ``errors``
        return "errors" not in body

    def record(self, item: Mapping[str, Any]) -> Record:
        data = item.get("data")
        data = data if isinstance(data, Mapping) else {}
        kind = text(data, "type")
        inner = data.get("object")
        state = inner.get(kind) if kind and isinstance(inner, Mapping) else None
        return Record(
            event_id=str(item["event_id"]),
            event_type=text(item, "type"),
            object_type=kind,
            object_id=text(data, "id"),
            occurred_at=iso_time(item.get("created_at")),  # RFC 3339, as Square documents
            object_version=revision(state),
            payload=item,
        )

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        if object_type not in OBJECT_PATHS:
            return super().fetch_object(object_type, object_id)
        path, permission = OBJECT_PATHS[object_type]
        body, response = self.client.get_json(
            path.format(quote(object_id, safe="")), permission=f"the {permission} permission"
        )
        if not isinstance(body, Mapping) or not isinstance(body.get(object_type), Mapping):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(response.request.url)} has no '{object_type}'"
            )
        return {object_type: body[object_type]}


def build(options: SourceOptions, client: ClientFactory) -> SquareEvents:
    if not options.api_key:
        raise ConfigError(
            f"source '{options.name}': reconciling Square needs 'api_key_env' (the application's "
            "personal access token: the Events API refuses OAuth access tokens)"
        )
    return SquareEvents(
        options.name,
        client(
            options.base_url or DEFAULT_BASE_URL,
            {"Authorization": f"Bearer {options.api_key}", "Square-Version": SQUARE_VERSION},
            options.hint(),
        ),
        page_size=options.page_size,
    )
