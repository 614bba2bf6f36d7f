"""Shopify GraphQL's pure parts: global ids, the search query of a slice, an order node in the
REST shape, the wait a THROTTLED answer asks for, and any answer read without a traceback."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from connectors.base import ScanOptions
from connectors.budget import BudgetSettings, RequestBudget
from connectors.errors import ConnectorError
from connectors.http import ProviderClient, RetryPolicy
from connectors.providers.shopify.graphql import (
    ShopifyGraphQLConnector,
    gid,
    numeric_id,
    rest_order,
    search_query,
    throttle_wait,
)
from tests.conftest import FIXTURES

NODE = {
    "id": "gid://shopify/Order/820982911946154508",
    "legacyResourceId": "820982911946154508",
    "name": "#1001",
    "email": "jon@example.com",
    "createdAt": "2025-01-01T10:00:00Z",
    "updatedAt": "2025-01-02T11:30:00Z",
    "cancelledAt": None,
    "displayFinancialStatus": "PARTIALLY_REFUNDED",
    "displayFulfillmentStatus": "PARTIALLY_FULFILLED",
    "currencyCode": "USD",
    "totalPriceSet": {"shopMoney": {"amount": "598.94", "currencyCode": "USD"}},
}


def test_global_ids_map_to_the_numeric_ids_webhooks_carry() -> None:
    assert gid("Order", "820982911946154508") == "gid://shopify/Order/820982911946154508"
    assert numeric_id("gid://shopify/Order/820982911946154508") == "820982911946154508"
    assert numeric_id("gid://shopify/Order/12?x=1") == "12"
    for bad in (None, 12, "", "Order/12", "gid://shopify/Order/abc", "gid://other/Order/1"):
        assert numeric_id(bad) is None


def test_a_slice_is_an_updated_at_range_in_shopify_search_syntax() -> None:
    start = int(datetime(2025, 1, 1, tzinfo=UTC).timestamp())
    assert search_query(start, start + 86400) == (
        "updated_at:>='2025-01-01T00:00:00Z' updated_at:<'2025-01-02T00:00:00Z'"
    )
    assert search_query(start, None) == "updated_at:>='2025-01-01T00:00:00Z'"


def test_an_order_node_reads_as_the_rest_order() -> None:
    rest = json.loads((FIXTURES / "shopify" / "order.json").read_text())["order"]
    order = rest_order(NODE, where="node 0")
    # REST's own names, as a business check's paths expect (admin_graphql_api_id is in REST
    # answers and webhooks of recent versions; this older fixture lacks it)
    assert set(order) - {"admin_graphql_api_id"} <= set(rest)
    assert order["id"] == 820982911946154508  # an int above 2**53, exact
    assert order["financial_status"] == "partially_refunded"
    assert order["fulfillment_status"] == "partial"
    assert order["total_price"] == "598.94" and order["currency"] == "USD"
    assert order["updated_at"] == "2025-01-02T11:30:00Z"
    assert (
        rest_order({**NODE, "displayFulfillmentStatus": "UNFULFILLED"}, where="n")[
            "fulfillment_status"
        ]
        is None
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"legacyResourceId": None, "id": "Order/1"}, "no numeric order id"),
        ({"legacyResourceId": "2"}, "no numeric order id"),  # disagrees with its global id
        ({"updatedAt": "yesterday"}, "no updatedAt"),
        ({"updatedAt": None}, "no updatedAt"),
    ],
)
def test_a_node_without_an_id_or_a_version_is_refused(change: dict[str, Any], reason: str) -> None:
    with pytest.raises(ConnectorError, match=rf"^node 3 has {reason}"):
        rest_order({**NODE, **change}, where="node 3")


def test_a_throttled_answer_waits_for_the_points_it_asked_for() -> None:
    cost = {
        "requestedQueryCost": 752,
        "actualQueryCost": None,
        "throttleStatus": {
            "maximumAvailable": 2000.0,
            "currentlyAvailable": 552,
            "restoreRate": 100.0,
        },
    }
    assert throttle_wait(cost) == pytest.approx(2.0)
    assert throttle_wait({**cost, "throttleStatus": {"restoreRate": 0}}) is None
    assert throttle_wait(None) is None


# -- any answer: records, or one clear error naming the request; nothing else ---------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)
NODES = st.fixed_dictionaries(
    {},
    optional={key: JSON | st.just(value) for key, value in NODE.items()},
)
ANSWERS = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {
            "data": st.fixed_dictionaries(
                {
                    "orders": st.fixed_dictionaries(
                        {
                            "nodes": st.lists(NODES, max_size=3) | JSON,
                            "pageInfo": st.fixed_dictionaries(
                                {
                                    "hasNextPage": st.booleans() | JSON,
                                    "endCursor": st.text(max_size=8) | JSON,
                                }
                            )
                            | JSON,
                        }
                    )
                    | JSON
                }
            )
            | JSON,
        },
        optional={"errors": JSON, "extensions": JSON},
    ),
)


def _connector(answer: Any) -> ShopifyGraphQLConnector:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=answer)

    clock = [0.0]  # waits pass at once: THROTTLED answers and retried pages cost no real time

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    budget = RequestBudget(BudgetSettings(None, 1), clock=lambda: clock[0], sleep=sleep)
    client = ProviderClient(
        "shop",
        "https://shop.example",
        transport=httpx.MockTransport(handler),
        sleep=sleep,
        policy=RetryPolicy(max_attempts=1),
        budget=budget,
    )
    return ShopifyGraphQLConnector("shop", client, api_version="2025-01")


@settings(max_examples=300, deadline=None)
@given(ANSWERS)
@example({"errors": "\n"})  # issue 34: a two-line message, found by this test under load in CI
@example({"errors": [{"message": "a\r\nb\u2028c"}]})
def test_any_answer_gives_records_or_a_connector_error_naming_the_source(answer: Any) -> None:
    connector = _connector(answer)
    options = ScanOptions(now=datetime(2025, 1, 3, tzinfo=UTC))
    try:
        for page in connector.pages(None, options):
            for record in page.records:
                assert record.object_id is not None and record.object_id.isdigit()
                assert record.occurred_at is not None
            if page.done:
                break
    except ConnectorError as exc:
        assert str(exc).startswith("source 'shop':") and "\n" not in str(exc)
    finally:
        connector.close()
