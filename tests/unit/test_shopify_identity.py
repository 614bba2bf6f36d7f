"""A Shopify delivery's identity, pure: its topic and ``X-Shopify-Event-Id`` (one event however many
subscriptions deliver it), the webhook id where the event id is absent, the webhook id always the
delivery's own."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.errors import RejectedDelivery
from connectors.providers.shopify.base import delivery_identity, parse_delivery

BODY = json.dumps({"id": 820982911946154508}).encode()


def headers(webhook: str, topic: str | None = "orders/create", event: str | None = "ev-1") -> dict:
    out = {"x-shopify-webhook-id": webhook}
    if topic is not None:
        out["x-shopify-topic"] = topic
    if event is not None:
        out["x-shopify-event-id"] = event
    return out


def test_two_subscriptions_of_one_topic_name_one_event_each_delivery_its_own() -> None:
    first, second = parse_delivery(headers("wh-1"), BODY), parse_delivery(headers("wh-2"), BODY)
    assert first.event_id == second.event_id == "orders/create:ev-1"
    assert (first.delivery_id, second.delivery_id) == ("wh-1", "wh-2")
    assert first.object_id == "820982911946154508" and first.event_type == "orders/create"


def test_one_action_that_fires_two_topics_is_two_events() -> None:
    created = parse_delivery(headers("wh-1", "orders/create"), BODY)
    paid = parse_delivery(headers("wh-2", "orders/paid"), BODY)
    assert created.event_id != paid.event_id


@pytest.mark.parametrize(("topic", "event"), [("orders/create", None), (None, "ev-1"), (" ", "")])
def test_without_topic_and_event_id_the_webhook_id_names_it(
    topic: str | None, event: str | None
) -> None:
    assert parse_delivery(headers("wh-9", topic, event), BODY).event_id == "wh-9"
    assert delivery_identity(headers("wh-9", topic, event)) is None


@given(topic=st.text(max_size=300), event=st.text(max_size=300))
def test_any_header_values_give_an_identity_or_a_clear_4xx(topic: str, event: str) -> None:
    try:
        parsed = parse_delivery(headers("wh-1", topic, event), BODY)
    except RejectedDelivery as exc:
        assert exc.status_code == 400 and "\n" not in exc.reason
        return
    assert parsed.event_id in ("wh-1", f"{topic.strip()}:{event.strip()}")
