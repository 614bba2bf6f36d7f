"""The sandbox's Stripe events list as stripe-python reads it: the library's own array and range
encodings (``types[0]=…``, ``created[gte]=…``) are honoured, not ignored, and a parameter Stripe
does not know is refused as Stripe refuses it (issue 49: an arm that asked for one type was handed
every event)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
import stripe
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.providers.stripe.sandbox import array_values
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from tests.conftest import RunningServer, start_server

NOW = datetime.now(UTC).replace(microsecond=0)
KEY = "sk_test_sandbox"


@pytest.fixture(scope="module")
def box() -> Iterator[tuple[Sandbox, RunningServer]]:
    world = build_world(3, now=NOW, stripe_events=400, github_deliveries=0, shopify_orders=0)
    sandbox = Sandbox(world, stand_ins=[])
    server = start_server(sandbox.app)
    yield sandbox, server
    server.stop()


def _client(url: str) -> stripe.StripeClient:
    return stripe.StripeClient(KEY, base_addresses={"api": url}, max_network_retries=0)


def test_stripe_pythons_types_and_created_filters_are_honoured(
    box: tuple[Sandbox, RunningServer],
) -> None:
    sandbox, server = box
    events = sandbox.world.stripe_events
    since = sorted(e["created"] for e in events)[len(events) // 2]
    wanted = {"invoice.paid", "charge.succeeded"}
    listed = _client(server.url).v1.events.list(
        {"types": sorted(wanted), "created": {"gte": since}, "limit": 25}
    )
    got = [e.id for e in listed.auto_paging_iter()]
    expected = [
        e["id"]
        for e in reversed(events)  # newest first
        if e["type"] in wanted and e["created"] >= since
    ]
    assert got == expected and 0 < len(got) < len(events) // 2


@pytest.mark.parametrize(
    "query",
    [
        "types[0]=invoice.paid&types[1]=charge.succeeded",
        "types[]=invoice.paid&types[]=charge.succeeded",
        "types=invoice.paid&types=charge.succeeded",
    ],
)
def test_every_array_encoding_lists_the_same_events(
    box: tuple[Sandbox, RunningServer], query: str
) -> None:
    sandbox, server = box
    answer = httpx.get(
        f"{server.url}/v1/events?limit=100&{query}", headers={"Authorization": f"Bearer {KEY}"}
    ).json()
    kinds = {e["type"] for e in answer["data"]}
    assert kinds == {"invoice.paid", "charge.succeeded"} & {
        e["type"] for e in sandbox.world.stripe_events
    }


def test_a_parameter_stripe_does_not_know_is_refused_not_ignored(
    box: tuple[Sandbox, RunningServer],
) -> None:
    _, server = box
    with pytest.raises(stripe.InvalidRequestError, match="unknown parameter: typez"):
        _client(server.url).v1.events.list({"typez": ["invoice.paid"]})  # type: ignore[typeddict-unknown-key]
    refused = httpx.get(
        f"{server.url}/v1/events?delivery_success=false",
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "delivery_success"


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["types", "types[]", "types[0]", "types[1]", "types[12]", "type"]),
            st.text(max_size=5),
        ),
        max_size=6,
    )
)
@settings(max_examples=200)
def test_array_values_reads_every_encoding_in_index_order(params: list[tuple[str, str]]) -> None:
    values = array_values(params, "types")
    assert sorted(values) == sorted(v for k, v in params if k != "type")
    indexed = [(int(k[6:-1]), v) for k, v in params if k[6:-1].isdigit()]
    assert values[len(values) - len(indexed) :] == [v for _, v in sorted(indexed)]
