"""The sandbox's Shopify GraphQL Admin API: ``orders(first, after, query, sortKey, reverse)`` and
``order(id)`` over the same world as the REST routes, the calculated query cost with its
``throttleStatus``, and ``THROTTLED`` answers when the cost bucket runs dry.

Queries are parsed and validated against a schema by graphql-core, as Shopify validates them: a
field the connector misspells is an error here, not a silently empty page. The schema is the subset
of Shopify's that reconciliation reads, with Shopify's names and types. Unlike Shopify, which
ignores a search term it cannot read, the sandbox refuses one, so a malformed filter fails tests.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from graphql import (
    FieldNode,
    GraphQLError,
    OperationDefinitionNode,
    SelectionSetNode,
    build_schema,
    execute_sync,
    parse,
    validate,
    value_from_ast_untyped,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from connectors.providers.shopify.sandbox import ShopifyApi
from connectors.sandbox.common import b64, unb64

SCHEMA = build_schema(
    """
    scalar DateTime
    scalar Decimal
    scalar UnsignedInt64

    enum OrderSortKeys { CREATED_AT ID UPDATED_AT }
    enum OrderDisplayFinancialStatus {
      AUTHORIZED EXPIRED PAID PARTIALLY_PAID PARTIALLY_REFUNDED PENDING REFUNDED VOIDED
    }
    enum OrderDisplayFulfillmentStatus {
      FULFILLED IN_PROGRESS ON_HOLD OPEN PARTIALLY_FULFILLED PENDING_FULFILLMENT REQUEST_DECLINED
      RESTOCKED SCHEDULED UNFULFILLED
    }
    enum CurrencyCode { CAD EUR GBP JPY USD }

    type MoneyV2 { amount: Decimal! currencyCode: CurrencyCode! }
    type MoneyBag { shopMoney: MoneyV2! presentmentMoney: MoneyV2! }

    type Order {
      id: ID!
      legacyResourceId: UnsignedInt64!
      name: String!
      email: String
      createdAt: DateTime!
      updatedAt: DateTime!
      cancelledAt: DateTime
      displayFinancialStatus: OrderDisplayFinancialStatus
      displayFulfillmentStatus: OrderDisplayFulfillmentStatus!
      currencyCode: CurrencyCode!
      totalPriceSet: MoneyBag!
    }
    type PageInfo {
      hasNextPage: Boolean!
      hasPreviousPage: Boolean!
      startCursor: String
      endCursor: String
    }
    type OrderEdge { cursor: String! node: Order! }
    type OrderConnection { edges: [OrderEdge!]! nodes: [Order!]! pageInfo: PageInfo! }

    type QueryRoot {
      orders(
        first: Int, after: String, last: Int, before: String, query: String,
        sortKey: OrderSortKeys = ID, reverse: Boolean = false
      ): OrderConnection!
      order(id: ID!): Order
    }
    schema { query: QueryRoot }
    """
)
MAX_PAGE = 250
# Shopify's standard plan: a 2,000-point bucket restored at 100 points a second.
POINTS, RESTORE_RATE = 2000.0, 100.0
SEARCH_TERM = re.compile(r"^updated_at:(>=|<=|>|<)'?([0-9T:+\-.Z]+)'?$")
FULFILLMENT = {None: "UNFULFILLED", "fulfilled": "FULFILLED", "partial": "PARTIALLY_FULFILLED"}
SORT_FIELD = {"UPDATED_AT": "updatedAt", "CREATED_AT": "createdAt", "ID": "legacyResourceId"}


def graphql_time(rest_time: str) -> str:
    """GraphQL's DateTime: UTC with ``Z`` (REST answers with the shop's offset)."""
    return datetime.fromisoformat(rest_time).strftime("%Y-%m-%dT%H:%M:%SZ")


def order_node(order: Mapping[str, Any]) -> dict[str, Any]:
    """A world order (in the REST shape) as GraphQL's Order."""
    money = {"amount": order["total_price"], "currencyCode": order["currency"]}
    return {
        "id": f"gid://shopify/Order/{order['id']}",
        "legacyResourceId": str(order["id"]),
        "name": order["name"],
        "email": order.get("email"),
        "createdAt": graphql_time(order["created_at"]),
        "updatedAt": graphql_time(order["updated_at"]),
        "cancelledAt": order.get("cancelled_at"),
        "displayFinancialStatus": str(order["financial_status"]).upper(),
        "displayFulfillmentStatus": FULFILLMENT.get(order.get("fulfillment_status"), "OPEN"),
        "currencyCode": order["currency"],
        "totalPriceSet": {"shopMoney": money, "presentmentMoney": money},
    }


def search_filter(query: str | None) -> list[tuple[str, datetime]]:
    """``updated_at`` comparisons of a search query; any other term is refused (see the module)."""
    terms = []
    for term in (query or "").split():
        match = SEARCH_TERM.match(term)
        if not match:
            raise GraphQLError(f"the sandbox reads only updated_at comparisons, not {term!r}")
        try:
            at = datetime.fromisoformat(match.group(2).replace("Z", "+00:00"))
        except ValueError:
            raise GraphQLError(f"invalid time in search term {term!r}") from None
        terms.append((match.group(1), at))
    return terms


def _kept(node: Mapping[str, Any], terms: list[tuple[str, datetime]]) -> bool:
    at = datetime.fromisoformat(node["updatedAt"].replace("Z", "+00:00"))
    checks = {">=": at.__ge__, ">": at.__gt__, "<=": at.__le__, "<": at.__lt__}
    return all(checks[op](bound) for op, bound in terms)


def _selection_cost(
    selection: SelectionSetNode | None, variables: Mapping[str, Any], returned: int | None = None
) -> int:
    """Shopify's calculated cost of a selection: 1 per object, 0 per scalar, and a connection 2
    plus its page size times one node's cost (the nodes it ``returned``, once answered)."""
    if selection is None:
        return 0
    total = 0
    for field in selection.selections:
        if not isinstance(field, FieldNode) or field.selection_set is None:
            continue  # a scalar (fragments are not used by the connectors)
        args = {
            a.name.value: value_from_ast_untyped(a.value, dict(variables))
            for a in field.arguments or ()
        }
        if "first" in args or "last" in args:
            asked = int(args.get("first") or args.get("last") or 0)
            size = asked if returned is None else returned
            total += 2 + size * _node_cost(field.selection_set, variables)
        elif returned == 0:  # an object that was not found costs nothing
            continue
        else:
            total += 1 + _selection_cost(field.selection_set, variables)
    return total


def _node_cost(connection: SelectionSetNode, variables: Mapping[str, Any]) -> int:
    for field in connection.selections:
        if isinstance(field, FieldNode) and field.name.value in ("nodes", "edges"):
            inner = field.selection_set
            if field.name.value == "edges" and inner is not None:
                node = [f for f in inner.selections if isinstance(f, FieldNode)]
                inner = next((f.selection_set for f in node if f.name.value == "node"), None)
            return 1 + _selection_cost(inner, variables)
    return 0


def query_cost(document: Any, variables: Mapping[str, Any], returned: int | None = None) -> int:
    """The requested cost, or with ``returned`` the actual one (at least 1 point either way)."""
    operation = next(d for d in document.definitions if isinstance(d, OperationDefinitionNode))
    return max(1, _selection_cost(operation.selection_set, variables, returned))


class _Root:
    """The query root: graphql-core calls these with the field's arguments."""

    def __init__(self, orders: list[dict[str, Any]]) -> None:
        self._orders = orders
        self.returned = 0

    def orders(self, info: Any, **args: Any) -> dict[str, Any]:
        first, last = args.get("first"), args.get("last")
        size: int | None = first if first is not None else last
        if size is None:
            raise GraphQLError("you must provide one of first or last")
        if not 1 <= size <= MAX_PAGE:
            raise GraphQLError(f"The first and last arguments must be between 1 and {MAX_PAGE}")
        if last is not None or args.get("before"):
            raise GraphQLError("the sandbox pages forward only (first/after)")
        field = SORT_FIELD[args.get("sortKey") or "ID"]
        terms = search_filter(args.get("query"))
        nodes = sorted(
            (n for n in self._orders if _kept(n, terms)),
            key=lambda n: (n[field], int(n["legacyResourceId"])),
            reverse=bool(args.get("reverse")),
        )
        if after := args.get("after"):
            state = unb64(after)
            if state is None or not isinstance(state.get("k"), list) or len(state["k"]) != 2:
                raise GraphQLError(f"Invalid cursor: {after}")
            key = (state["k"][0], state["k"][1])

            def past(n: dict[str, Any]) -> bool:
                here = (n[field], int(n["legacyResourceId"]))
                return here < key if args.get("reverse") else here > key

            nodes = [n for n in nodes if past(n)]
        page = nodes[:size]
        self.returned = len(page)
        cursors = [b64({"k": [n[field], int(n["legacyResourceId"])]}) for n in page]
        return {
            "nodes": page,
            "edges": [{"cursor": c, "node": n} for c, n in zip(cursors, page, strict=True)],
            "pageInfo": {
                "hasNextPage": len(nodes) > size,
                "hasPreviousPage": bool(after),
                "startCursor": cursors[0] if cursors else None,
                "endCursor": cursors[-1] if cursors else None,
            },
        }

    def order(self, info: Any, id: str) -> dict[str, Any] | None:
        found = next((n for n in self._orders if n["id"] == id), None)
        self.returned = 0 if found is None else 1
        return found


class ShopifyGraphQLApi(ShopifyApi):
    """GraphQL beside REST (the same keys and world)."""

    shopify_points: tuple[float, float]  # the cost bucket: (maximum points, restored a second)
    _points: tuple[float, float] | None = None  # (points available, at monotonic time)

    def _spend(self, asked: int) -> tuple[bool, float]:
        """Take ``asked`` points if the bucket holds them (locked): (taken, points available)."""
        now = time.monotonic()
        maximum, rate = self.shopify_points
        held, at = self._points or (maximum, now)
        held = min(maximum, held + (now - at) * rate)
        taken = asked <= held
        self._points = (held - asked if taken else held, now)
        return taken, self._points[0]

    def _refund(self, points: int) -> float:
        held, at = self._points or (self.shopify_points[0], time.monotonic())
        self._points = (min(self.shopify_points[0], held + points), at)
        return self._points[0]

    def _cost(self, requested: int, actual: int | None, available: float) -> dict[str, Any]:
        return {
            "cost": {
                "requestedQueryCost": requested,
                "actualQueryCost": actual,
                "throttleStatus": {
                    "maximumAvailable": self.shopify_points[0],
                    "currentlyAvailable": int(available),
                    "restoreRate": self.shopify_points[1],
                },
            }
        }

    async def shopify_graphql(self, request: Request) -> Response:
        if (denied := self._shopify_auth(request)) or (denied := await self._fault(request)):
            return denied
        try:
            payload = await request.json()
        except ValueError:
            return JSONResponse({"errors": "Bad Request: the body is not JSON"}, status_code=400)
        query = payload.get("query") if isinstance(payload, dict) else None
        variables = payload.get("variables") or {} if isinstance(payload, dict) else {}
        if not isinstance(query, str) or not isinstance(variables, dict):
            return JSONResponse({"errors": "Bad Request: no query"}, status_code=400)
        try:
            document = parse(query)
        except GraphQLError as exc:
            return JSONResponse({"errors": [exc.formatted]})
        if invalid := validate(SCHEMA, document):
            return JSONResponse({"errors": [e.formatted for e in invalid]})
        # run first (the world is in memory): invalid variables and refused arguments answer
        # their errors before any cost is worked out from them
        root = _Root([order_node(o) for o in self.world.shopify_orders.values()])
        result = execute_sync(SCHEMA, document, root_value=root, variable_values=variables)
        if result.errors and result.data is None:
            return JSONResponse({"data": None, "errors": [e.formatted for e in result.errors]})
        requested = query_cost(document, variables)
        if requested > self.shopify_points[0]:
            return JSONResponse(
                {
                    "errors": [
                        {
                            "message": f"Query cost is {requested}, which exceeds the single "
                            f"query max cost limit ({self.shopify_points[0]:g}).",
                            "extensions": {"code": "MAX_COST_EXCEEDED"},
                        }
                    ]
                }
            )
        with self._lock:
            taken, available = self._spend(requested)
        if not taken:
            self.stats.throttled += 1
            return JSONResponse(
                {
                    "errors": [
                        {
                            "message": "Throttled",
                            "extensions": {
                                "code": "THROTTLED",
                                "documentation": "https://shopify.dev/api/usage/rate-limits",
                            },
                        }
                    ],
                    "extensions": self._cost(requested, None, available),
                }
            )
        actual = query_cost(document, variables, returned=root.returned)
        with self._lock:
            available = self._refund(max(0, requested - actual))
        body: dict[str, Any] = {"data": result.data}
        if result.errors:
            body["errors"] = [e.formatted for e in result.errors]
        body["extensions"] = self._cost(requested, actual, available)
        return JSONResponse(body)
