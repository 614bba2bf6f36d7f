"""Shopify through its GraphQL Admin API (the default; REST is legacy since October 2024).

``POST /admin/api/{version}/graphql.json`` with ``orders(first: 250, after: …, query:
"updated_at:>='…' updated_at:<'…'", sortKey: UPDATED_AT, reverse: true)`` and
``pageInfo { hasNextPage endCursor }`` (docs/providers.md §3). The scan's window is read as
``updated_at`` time slices (``connectors.slices``), newest first within each, so with
``max_concurrency`` above 1 several slices are paged at once; with 1 it is one slice, paged in turn.

GraphQL returns only what is selected and names it its own way; each order is mapped here to the
shape the REST API and the webhooks carry (``id`` numeric, ``updated_at``, ``financial_status``, …)
so records, business checks and payload paths are the same whichever API read them.

The budget's signal is the query cost: every answer's ``extensions.cost.throttleStatus`` says how
many points are left of the bucket and how fast they come back; a ``THROTTLED`` answer (HTTP 200 or
429 — the body decides) waits until the points it asked for are back.

Cursor, per resource: ``since`` (the newest ``updated_at`` of the last complete scan, the same key
as REST's) and, during a scan, ``phase: sliced`` with every slice's position.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import closing
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from connectors.base import Cursor, Page, Record, ScanOptions
from connectors.errors import (
    AuthError,
    ConfigError,
    ConnectorError,
    MalformedResponseError,
    NotFoundError,
    UnavailableError,
    UnsupportedError,
)
from connectors.http import ProviderClient
from connectors.paging import PageGuard, PageShape
from connectors.providers.shopify.base import ShopifyBase
from connectors.slices import Slice, SliceFetch, run_slices

PAGE_SIZE = 250  # GraphQL's maximum ``first``
THROTTLE_TRIES = 8  # THROTTLED answers in a row before the request fails
GID_PREFIX = "gid://shopify/"

# The REST-equivalent fields of an order (Order.totalPriceSet costs 2 points an order, the rest 0).
ORDER_FIELDS = """
    id legacyResourceId name email createdAt updatedAt cancelledAt
    displayFinancialStatus displayFulfillmentStatus currencyCode
    totalPriceSet { shopMoney { amount currencyCode } }
"""
ORDERS_QUERY = (
    "query Orders($first: Int!, $after: String, $query: String) {\n"
    "  orders(first: $first, after: $after, query: $query, sortKey: UPDATED_AT, reverse: true) {\n"
    "    pageInfo { hasNextPage endCursor }\n"
    f"    nodes {{ {ORDER_FIELDS} }}\n"
    "  }\n"
    "}"
)
ORDER_QUERY = f"query Order($id: ID!) {{\n  order(id: $id) {{ {ORDER_FIELDS} }}\n}}"

# GraphQL's display statuses as REST's ``fulfillment_status`` spells them (None: unfulfilled);
# the others are the enum in lower case, as for ``financial_status``.
FULFILLMENT = {"FULFILLED": "fulfilled", "PARTIALLY_FULFILLED": "partial", "UNFULFILLED": None}


def gid(kind: str, numeric_id: str) -> str:
    """``gid://shopify/Order/123`` for ``("Order", "123")``."""
    return f"{GID_PREFIX}{kind}/{numeric_id}"


def numeric_id(global_id: Any) -> str | None:
    """The numeric id webhooks and REST carry, from a global id (None: not one)."""
    if not isinstance(global_id, str) or not global_id.startswith(GID_PREFIX):
        return None
    tail = global_id.rsplit("/", 1)[-1].partition("?")[0]
    return tail if tail.isdigit() else None


def search_time(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def search_query(start: int, end: int | None) -> str:
    """Shopify's search syntax for ``[start, end)`` in epoch seconds (no end: up to now)."""
    low = f"updated_at:>='{search_time(start)}'"
    return low if end is None else f"{low} updated_at:<'{search_time(end)}'"


def _epoch(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int((parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp())


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def rest_order(node: Any, *, where: str) -> dict[str, Any]:
    """A GraphQL order node in the REST/webhook shape (pure). ``where`` names the node in errors."""
    if not isinstance(node, Mapping):
        raise MalformedResponseError(f"{where} is not an object")
    legacy = node.get("legacyResourceId")
    number = str(legacy) if isinstance(legacy, str | int) and not isinstance(legacy, bool) else None
    from_gid = numeric_id(node.get("id"))
    if number is None or not number.isdigit():
        number = from_gid
    if number is None or (from_gid is not None and from_gid != number):
        raise MalformedResponseError(f"{where} has no numeric order id ({node.get('id')!r})")
    updated = node.get("updatedAt")
    if _epoch(updated) is None:
        raise MalformedResponseError(f"{where} has no updatedAt ({updated!r})")
    money = node.get("totalPriceSet")
    shop_money = money.get("shopMoney") if isinstance(money, Mapping) else None
    amount = shop_money.get("amount") if isinstance(shop_money, Mapping) else None
    fulfillment = node.get("displayFulfillmentStatus")
    return {
        "id": int(number),  # REST's and the webhooks' id: an integer, above 2**53 too
        "admin_graphql_api_id": node.get("id"),
        "name": node.get("name"),
        "email": node.get("email"),
        "created_at": node.get("createdAt"),
        "updated_at": updated,
        "cancelled_at": node.get("cancelledAt"),
        "currency": node.get("currencyCode"),
        "total_price": None if amount is None else str(amount),
        "financial_status": _lower(node.get("displayFinancialStatus")),
        "fulfillment_status": (
            FULFILLMENT.get(fulfillment, fulfillment.lower())
            if isinstance(fulfillment, str)
            else fulfillment
        ),
    }


def order_record(order: Mapping[str, Any]) -> Record:
    updated = order["updated_at"]
    return Record(
        event_id=None,
        event_type=None,
        object_type="order",
        object_id=str(order["id"]),
        occurred_at=datetime.fromisoformat(updated.replace("Z", "+00:00")),
        object_version=updated,
        payload=order,
    )


def throttle_wait(cost: Any) -> float | None:
    """Seconds until a THROTTLED query's points are back, from ``extensions.cost`` (None: unknown)."""
    if not isinstance(cost, Mapping):
        return None
    status = cost.get("throttleStatus")
    asked = cost.get("requestedQueryCost")
    if not isinstance(status, Mapping) or not isinstance(asked, int | float):
        return None
    available, rate = status.get("currentlyAvailable"), status.get("restoreRate")
    if not isinstance(available, int | float) or not isinstance(rate, int | float) or rate <= 0:
        return None
    return max(0.0, (asked - available) / rate)


class ShopifyGraphQLConnector(ShopifyBase):
    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        api_version: str,
        resources: tuple[str, ...] = ("orders",),
        page_size: int = PAGE_SIZE,
    ) -> None:
        unsupported = [r for r in resources if r != "orders"]
        if unsupported:
            raise ConfigError(
                f"source '{source}': resources {unsupported} are read through Shopify's REST API "
                'only; set api = "rest" or list only "orders"'
            )
        super().__init__(source, client, resources)
        self.endpoint = f"/admin/api/{api_version}/graphql.json"
        self.page_size = min(max(page_size, 1), PAGE_SIZE)

    # -- one query -------------------------------------------------------------------------------

    def query(self, text: str, variables: Mapping[str, Any]) -> Mapping[str, Any]:
        """The ``data`` of a query, after any THROTTLED answers have been waited out."""
        for _ in range(THROTTLE_TRIES):
            body, _response = self.client.post_json(
                self.endpoint,
                {"query": text, "variables": dict(variables)},
                permission="the read_orders access scope",
            )
            if not isinstance(body, Mapping):
                raise MalformedResponseError(
                    f"source '{self.source}': POST {self.endpoint} did not answer a JSON object"
                )
            extensions = body.get("extensions")
            cost = extensions.get("cost") if isinstance(extensions, Mapping) else None
            self._read_cost(cost)
            errors = body.get("errors")
            if not errors:
                data = body.get("data")
                if not isinstance(data, Mapping):
                    raise MalformedResponseError(
                        f"source '{self.source}': POST {self.endpoint} answered no 'data'"
                    )
                return data
            codes = _error_codes(errors)
            if "THROTTLED" in codes:
                wait = throttle_wait(cost) or 1.0
                self.client.budget.throttled(wait)
                self.client.pause(wait)
                continue
            message = _error_message(errors)
            if codes & {"ACCESS_DENIED", "UNAUTHORIZED"}:
                raise AuthError(
                    f"source '{self.source}': POST {self.endpoint} refused the query ({message}); "
                    "this call needs the read_orders access scope"
                )
            raise ConnectorError(
                f"source '{self.source}': POST {self.endpoint} answered GraphQL errors: {message}"
            )
        raise UnavailableError(
            f"source '{self.source}': POST {self.endpoint} was THROTTLED {THROTTLE_TRIES} times "
            "in a row"
        )

    def _read_cost(self, cost: Any) -> None:
        if not isinstance(cost, Mapping):
            return
        status = cost.get("throttleStatus")
        if not isinstance(status, Mapping):
            return
        available, maximum, restore = (
            _number(status.get(k))
            for k in ("currentlyAvailable", "maximumAvailable", "restoreRate")
        )
        if available is not None and maximum and restore:
            spent = _number(cost.get("requestedQueryCost")) or 1.0
            self.client.budget.graphql_cost(available, maximum, restore, spent)

    # -- the scan --------------------------------------------------------------------------------

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        stored: Mapping[str, Any] = {} if options.full else dict((cursor or {}).get("orders") or {})
        position = dict(stored)
        if position.get("phase") != "sliced":
            position = self._window(stored, options)
        yield from self._sliced(position, options)

    @staticmethod
    def _window(stored: Mapping[str, Any], options: ScanOptions) -> dict[str, Any]:
        """A scan's first position: ``[since, now]`` as one slice. A REST scan's position under
        way (its ``next`` URL) is not GraphQL's: the window starts again from its ``since``."""
        since = _epoch(stored.get("since"))
        if since is None:
            since = int((options.now - options.initial_lookback).timestamp())
            start = since
        else:  # re-read the boundary: updates may land late; the position itself never moves back
            start = since - int(options.overlap.total_seconds())
        until = int(options.now.timestamp()) + 1
        return {
            "phase": "sliced",
            "since": stored.get("since") or search_time(since),
            "until": until,
            "slices": [Slice(start, until).as_json()],
            "newest": stored.get("since"),
        }

    def _fetch(self, piece: Slice, until: int) -> tuple[list[dict[str, Any]], bool, str | None]:
        # the newest slice has no upper bound: what is updated while the scan runs is listed now
        end = piece.end if piece.end < until else None
        variables = {
            "first": self.page_size,
            "after": piece.after,
            "query": search_query(piece.start, end),
        }
        data = self.query(ORDERS_QUERY, variables)
        where = f"source '{self.source}': POST {self.endpoint} ({variables['query']})"
        orders = data.get("orders")
        if not isinstance(orders, Mapping):
            raise MalformedResponseError(f"{where} answered no 'orders' connection")
        info, nodes = orders.get("pageInfo"), orders.get("nodes")
        if not isinstance(info, Mapping) or not isinstance(nodes, list):
            raise MalformedResponseError(f"{where} answered no 'pageInfo' and 'nodes'")
        more, after = info.get("hasNextPage"), info.get("endCursor")
        if not isinstance(more, bool) or (more and not isinstance(after, str)):
            raise MalformedResponseError(f"{where} answered a pageInfo without a next cursor")
        items = [rest_order(node, where=f"{where} node {i}") for i, node in enumerate(nodes)]
        return items, more, after if isinstance(after, str) else None

    def _sliced(self, position: Mapping[str, Any], options: ScanOptions) -> Iterator[Page]:
        try:
            plan = [Slice.from_json(value) for value in position["slices"]]
            until = position["until"]
            if not isinstance(until, int) or isinstance(until, bool):
                raise ValueError(f"not a time: {until!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedResponseError(
                f"source '{self.source}': its stored cursor is not a sliced scan ({exc}); run "
                "'hookledger reconcile --full' to start the window again"
            ) from None
        newest = position.get("newest")
        guards = threading.local()  # a fetcher pages one slice at a time: its guard is its own

        def shape(request: tuple[Slice, int], got: Any) -> PageShape:
            items, more, after = got
            following = (replace(request[0], after=after), until)
            ids = [item["id"] for item in items]
            return PageShape(ids, more, following if more else None, self.endpoint)

        def fetch(piece: Slice) -> SliceFetch:
            if not hasattr(guards, "guard"):
                guards.guard = PageGuard(self.source, shape, sleep=self.client.pause)
            items, more, after = guards.guard.fetch(lambda r: self._fetch(*r), (piece, until))
            records = tuple(order_record(item) for item in items)
            oldest = _epoch(items[-1]["updated_at"]) if items else None
            return SliceFetch(records, after or piece.after, more, oldest, self.endpoint)

        pages = run_slices(
            plan, fetch, concurrency=self.client.budget.concurrency, name=f"{self.source}-slice"
        )
        with closing(pages):
            for page in pages:
                records = tuple(page.fetched.items)
                for record in records:
                    if newest is None or (_epoch(record.object_version) or 0) > (
                        _epoch(newest) or 0
                    ):
                        newest = record.object_version
                if page.done:
                    state: dict[str, Any] = {"since": newest or position["since"]}
                else:
                    state = {
                        "phase": "sliced",
                        "since": position["since"],
                        "until": until,
                        "slices": [s.as_json() for s in page.plan],
                        "newest": newest,
                    }
                yield Page(
                    records,
                    {"orders": state},
                    done=page.done,
                    url=page.fetched.url,
                    slices=(sum(s.done for s in page.plan), len(page.plan)),
                )

    # -- look-ups --------------------------------------------------------------------------------

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        if object_type != "order":
            raise UnsupportedError(
                f"source '{self.source}': only orders are read through Shopify's GraphQL API"
            )
        if not object_id.isdigit():
            raise NotFoundError(f"source '{self.source}': '{object_id}' is not a Shopify order id")
        data = self.query(ORDER_QUERY, {"id": gid("Order", object_id)})
        node = data.get("order")
        if node is None:
            raise NotFoundError(f"source '{self.source}': order {object_id} was not found")
        return rest_order(node, where=f"source '{self.source}': order {object_id}")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value >= 0 else None


def _error_codes(errors: Any) -> set[str]:
    if not isinstance(errors, list):
        return set()
    codes = set()
    for error in errors:
        extensions = error.get("extensions") if isinstance(error, Mapping) else None
        code = extensions.get("code") if isinstance(extensions, Mapping) else None
        if isinstance(code, str):
            codes.add(code)
    return codes


def _error_message(errors: Any) -> str:
    """The first error's message, on one line (it ends up in a one-line run error and a log line)."""
    if isinstance(errors, list) and errors:
        first = errors[0]
        errors = first.get("message") if isinstance(first, Mapping) else first
    return " ".join(str(errors).split())[:200]
