"""Recurly's accounts, subscriptions and invoices, listed to reconcile its JSON webhooks
(``kind = "recurly"``).

What a Recurly reconciliation can find, and what it cannot: Recurly sends no event id and keeps no
list of the notifications it sent. A JSON webhook names its object (``{"id": "ra8foq26o2dt",
"object_type": "subscription", "event_type": "created", …}``) and the receiver stores it under a
hash of its body (``connectors.providers.recurly``), which no list can reproduce. So the lists are
read as the objects' states (records without an event id, judged by object): an account,
subscription or invoice changed within the window of which the inbox holds **no** notification
at all is ``missing``, and a business check compares each listed object's state with its row
(``diverged``, ``duplicate``). A lost notification about an object the inbox has heard of before
(a second ``updated``, a ``renewed``) is not found as missing; a business check on the state it
changed finds its effect. Facts, each with its source:

- **Endpoints.** ``GET /accounts``, ``/subscriptions``, ``/invoices`` on ``https://v3.recurly.com``
  (EU: ``https://v3.eu.recurly.com``), a site's by its API key. Recurly V3 OpenAPI (v2021-02-25),
  recurly/recurly-client-python ``openapi/api.yaml`` (``list_accounts``, ``list_subscriptions``,
  ``list_invoices``); recurly 4.79.0 ``recurly/base_client.py`` (``API_HOSTS``).
- **Paging.** Every list answers ``{"object": "list", "has_more", "next", "data"}``: "continually
  call the URL at ``next`` until ``has_more`` is ``false``"; ``next`` is the "path to subsequent page
  of results" (``/accounts?cursor=…&limit=…``: recurly-client-python ``tests/test_pager.py``).
  hookledger asks the configured host for that path (the API key goes nowhere else).
- **Page size, order, window.** ``limit`` 1-200 (default 20); ``order`` ``asc``/``desc`` (default
  desc); ``sort`` ``created_at``/``updated_at``: "You *really* only want to sort by ``updated_at``
  in ascending order. In descending order updated records will move behind the cursor";
  ``begin_time``/``end_time`` "inclusively filter" on that field (ISO 8601). A scan asks
  ``sort=updated_at&order=asc&begin_time=<window start>`` and keeps the newest ``updated_at`` read.
  OpenAPI ``components.parameters`` ``limit``, ``order``, ``sort_dates``, ``filter_begin_time``.
- **Retention.** None stated: objects stay listed (``retention`` None).
- **Rate limit.** "Sandbox sites: 400 requests/min … Production sites: 1,000 requests/min. Only
  GET requests count", over "a sliding 5 minute window"; beyond, ``429 Too Many Requests`` with
  ``X-RateLimit-Limit``, ``X-RateLimit-Remaining`` and ``X-RateLimit-Reset`` (Unix seconds), which
  hookledger waits for. OpenAPI ``info.description`` "Limits". ``BUDGET``: 4 a second (240 a
  minute), under the sandbox's limit.
- **Auth and version.** HTTP Basic, "the API key as the username and … the password [as] an empty
  string" (OpenAPI ``securitySchemes.api_key``); "Every request must include an ``Accept`` header"
  ``application/vnd.recurly.v2021-02-25`` (a missing or unknown one: 406 ``invalid_api_version``).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlsplit

from connectors.base import Access, Capabilities, Cursor, Listing, Page, Record, ScanOptions
from connectors.budget import BudgetSettings
from connectors.errors import ConfigError, MalformedResponseError, UnsupportedError
from connectors.event_list import Call
from connectors.http import ProviderClient, redact_url
from connectors.options import ProviderKeys, SourceOptions
from connectors.paging import PageGuard, PageShape
from connectors.parsing import iso_time
from connectors.provider import ClientFactory

DEFAULT_BASE_URL = "https://v3.recurly.com"  # the EU's: https://v3.eu.recurly.com
ACCEPT = "application/vnd.recurly.v2021-02-25"
MAX_LIMIT = 200
PERMISSION = "a private API key of the site that reads accounts, subscriptions and invoices"
# 400 requests a minute on a sandbox site, 1,000 GETs on a production one: 240 a minute
BUDGET = BudgetSettings(rate=4.0, concurrency=2)


def _invoice_type(item: Mapping[str, Any]) -> str:
    """An invoice's webhooks are ``charge_invoice.*``, ``credit_invoice.*`` or, before Credit
    Invoices, ``invoice.*`` (https://docs.recurly.com/v1.3/docs/charge-invoice-notifications,
    https://docs.recurly.com/v1.3/docs/invoice-notifications)."""
    kind = item.get("type")
    return f"{kind}_invoice" if kind in ("charge", "credit") else "invoice"


@dataclass(frozen=True)
class RecurlyList:
    path: str
    object_type: Callable[[Mapping[str, Any]], str]  # the webhooks' object_type for an item
    types: tuple[str, ...]  # every object_type it can list (fetch_object)


LISTS = {
    "accounts": RecurlyList("/accounts", lambda item: "account", ("account",)),
    "subscriptions": RecurlyList("/subscriptions", lambda item: "subscription", ("subscription",)),
    "invoices": RecurlyList(
        "/invoices", _invoice_type, ("charge_invoice", "credit_invoice", "invoice")
    ),
}


class RecurlyKeys(ProviderKeys):
    # the objects listed: those the endpoint is subscribed to notifications of
    lists: tuple[str, ...] = ("accounts", "subscriptions", "invoices")


def rule(values: Mapping[str, Any]) -> str | None:
    unknown = [name for name in values.get("lists") or () if name not in LISTS]
    if unknown:
        return f"key 'lists': {', '.join(map(repr, unknown))} is not one of {', '.join(LISTS)}"
    if values.get("lists") == ():
        return "key 'lists': name at least one of " + ", ".join(LISTS)
    return None


def recurly_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def state_record(spec: RecurlyList, item: Any, source: str, url: str, index: int) -> Record:
    """A listed object as its state, judged by object (Recurly's webhooks carry no event id)."""
    where = f"source '{source}': {redact_url(url)} item {index}"
    if not isinstance(item, Mapping):
        raise MalformedResponseError(f"{where} is not an object")
    oid = item.get("id")
    if not isinstance(oid, str) or not oid:
        raise MalformedResponseError(f"{where} has no 'id'")
    updated = iso_time(item.get("updated_at"))
    if updated is None:
        raise MalformedResponseError(f"{where} ({oid}) has no updated_at time")
    return Record(
        event_id=None,
        event_type=None,
        object_type=spec.object_type(item),
        object_id=oid,
        occurred_at=updated,
        object_version=updated.isoformat(),
        payload=item,
    )


def onward(body: Mapping[str, Any], source: str, url: str) -> Call | None:
    """The next page: ``next``'s path and query, asked of the configured host."""
    if body.get("has_more") is not True:
        return None
    following = body.get("next")
    if not isinstance(following, str) or not following:
        raise MalformedResponseError(
            f"source '{source}': {redact_url(url)} says has_more but names no next page"
        )
    parts = urlsplit(following)
    return Call(f"{parts.path}?{parts.query}" if parts.query else parts.path)


class RecurlyObjects:
    """Recurly's objects, listed by ``updated_at`` for a reconciliation."""

    # lists current objects, not the notifications sent: an inbox event it does not list is no
    # orphan; each record is the object as it is now
    capabilities = Capabilities(lists_events=False)
    listing = Listing()

    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        lists: tuple[str, ...] = tuple(LISTS),
        page_size: int | None = None,
    ) -> None:
        self.source = source
        self.client = client
        self.lists = {name: LISTS[name] for name in lists}
        self.page_size = min(max(page_size or MAX_LIMIT, 1), MAX_LIMIT)

    @property
    def retention(self) -> timedelta | None:
        return None

    def request_rate(self) -> float | None:
        return self.client.budget.current_rate()

    def close(self) -> None:
        self.client.close()

    def fetch(self, call: Call) -> tuple[Any, str]:
        body, response = self.client.get_json(
            call.url, params=list(call.params) or None, permission=PERMISSION
        )
        if not isinstance(body, Mapping):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(response.request.url)} is not a JSON object"
            )
        return body, str(response.request.url)

    def first(self, spec: RecurlyList, since: datetime, size: int) -> Call:
        query = (("limit", size), ("order", "asc"), ("sort", "updated_at"))
        return Call(spec.path, (*query, ("begin_time", recurly_time(since))))

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        state: dict[str, Any] = (
            {} if options.full else {k: dict(v) for k, v in (cursor or {}).items()}
        )
        names = list(self.lists)
        for index, name in enumerate(names):
            if (state.get(name) or {}).get("read"):
                continue  # read to its end earlier in this scan (a run resumed after it)
            last = index == len(names) - 1
            yield from self._list_pages(name, state, options, last)

    def _list_pages(
        self, name: str, state: dict[str, Any], options: ScanOptions, last: bool
    ) -> Iterator[Page]:
        spec = self.lists[name]
        pos = state.get(name) or {}
        stored = iso_time(pos.get("since"))
        since = (stored - options.overlap) if stored else options.now - options.initial_lookback
        newest = iso_time(pos.get("newest")) or stored
        # the objects read at the last scan's newest time: begin_time is inclusive, so they are
        # listed again, seen but not judged again (Page.relisted)
        judged = set(pos.get("at") or ()) if stored else set()
        at_newest = set(pos.get("newest_at") or pos.get("at") or ())
        call = (
            Call.from_json(pos["next"])
            if pos.get("next")
            else self.first(spec, since, self.page_size)
        )
        read: dict[int, tuple[list[Record], Call | None]] = {}

        def shape(request: Call, answer: tuple[Mapping[str, Any], str]) -> PageShape:
            body, url = answer
            items = body.get("data")
            if not isinstance(items, list):
                raise MalformedResponseError(
                    f"source '{self.source}': {redact_url(url)} has no list at 'data'"
                )
            records = [
                state_record(spec, item, self.source, url, i) for i, item in enumerate(items)
            ]
            following = onward(body, self.source, url)
            read[id(answer)] = (records, following)
            ids = [r.object_id for r in records]
            return PageShape(ids, following is not None, following, redact_url(url))

        guard = PageGuard(self.source, shape, sleep=self.client.pause)
        while True:
            answer = guard.fetch(self.fetch, call)
            records, following = read.pop(id(answer))
            again = [r for r in records if r.occurred_at == stored and r.object_id in judged]
            records = [r for r in records if r not in again]
            for r in records:
                # an update time ahead of now (a skewed or hostile answer) would stall the cursor
                if r.occurred_at is None or r.occurred_at > options.now:
                    continue
                if newest is None or r.occurred_at > newest:
                    newest, at_newest = r.occurred_at, set()
                if r.occurred_at == newest:
                    at_newest.add(str(r.object_id))
            kept = (newest or since).isoformat()
            seen_last = sorted(at_newest)[:MAX_LIMIT]
            state[name] = (
                {"since": pos.get("since"), "at": sorted(judged), "next": following.to_json()}
                | {"newest": kept, "newest_at": seen_last}
                if following
                else {"since": kept, "at": seen_last, "read": True}
            )
            done = following is None and last
            # the scan's end: every list starts again from its ``since`` on the next run
            cursor = {
                k: {"since": v.get("since"), "at": v.get("at", [])} if done else dict(v)
                for k, v in state.items()
            }
            yield Page(
                tuple(records), cursor, done=done, url=redact_url(answer[1]), relisted=tuple(again)
            )
            if following is None:
                return
            call = following

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        spec = next((s for s in LISTS.values() if object_type in s.types), None)
        if spec is None:
            raise UnsupportedError(
                f"source '{self.source}': hookledger reads no Recurly '{object_type}'"
            )
        body, _ = self.fetch(Call(f"{spec.path}/{quote(object_id, safe='')}"))
        return dict(body)

    def fetch_event(self, event_id: str) -> Record:
        raise UnsupportedError(
            f"source '{self.source}': Recurly keeps no notification to read by id"
        )

    def redeliver(self, event_id: str) -> None:
        raise UnsupportedError(
            f"source '{self.source}': Recurly cannot be asked here to send a notification again"
        )

    def check_access(self) -> Access:
        """One object of the first list: the request a scan makes."""
        spec = next(iter(self.lists.values()))
        body, url = self.fetch(Call(spec.path, (("limit", 1),)))
        items = body.get("data")
        if not isinstance(items, list):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(url)} has no list at 'data'"
            )
        for i, item in enumerate(items):
            state_record(spec, item, self.source, url, i)
        return Access(f"the API key lists {', '.join(self.lists)} ({redact_url(url)})")


def build(options: SourceOptions, client: ClientFactory) -> RecurlyObjects:
    if not options.api_key:
        raise ConfigError(
            f"source '{options.name}': reconciling Recurly needs 'api_key_env' (a private API key "
            "of the site)"
        )
    basic = base64.b64encode(f"{options.api_key}:".encode()).decode()
    headers = {"Authorization": f"Basic {basic}", "Accept": ACCEPT}
    keys = options.keys
    lists = keys.lists if isinstance(keys, RecurlyKeys) else tuple(LISTS)
    return RecurlyObjects(
        options.name,
        client(options.base_url or DEFAULT_BASE_URL, headers, options.hint()),
        lists=lists,
        page_size=options.page_size,
    )
