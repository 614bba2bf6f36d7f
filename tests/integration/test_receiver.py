"""The receiver over real loopback HTTP (uvicorn), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select

from connectors.parsing import MASK
from connectors.providers.shopify.signature import shopify_sign
from reconciler.inbox.handlers import HandlerRegistry
from reconciler.inbox.receiver import create_app
from reconciler.inbox.worker import Worker
from reconciler.storage.engine import make_engine
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS
from tests.conftest import SECRETS, make_settings
from tests.deliveries import (
    generic_delivery,
    github_delivery,
    shopify_delivery,
    standard_delivery,
    stripe_delivery,
)


def counts(engine: Engine) -> tuple[int, dict[str, int]]:
    with engine.connect() as conn:
        events = conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one()
        rows = conn.execute(
            select(DELIVERIES.c.outcome, func.count()).group_by(DELIVERIES.c.outcome)
        ).all()
    return int(events), {str(o): int(n) for o, n in rows}


@pytest.fixture
def receiver(db_url: str, engine: Engine, serve: Any) -> str:
    settings = make_settings(db_url)
    return str(serve(create_app(settings, engine)).url)


BUILDERS: dict[str, Callable[[], tuple[dict[str, str], bytes]]] = {
    "stripe": stripe_delivery,
    "github": github_delivery,
    "shopify": shopify_delivery,
    "svix": standard_delivery,
    "acme": generic_delivery,
}


@pytest.mark.parametrize("source", sorted(BUILDERS))
def test_each_kind_is_accepted_once_then_duplicate(
    receiver: str, engine: Engine, source: str
) -> None:
    headers, body = BUILDERS[source]()
    with httpx.Client(base_url=receiver) as client:
        first = client.post(f"/webhooks/{source}", content=body, headers=headers)
        second = client.post(f"/webhooks/{source}", content=body, headers=headers)
    assert first.status_code == 200 and first.json()["status"] == "accepted", first.text
    assert second.status_code == 200 and second.json()["status"] == "duplicate"
    assert counts(engine) == (1, {"accepted": 1, "duplicate": 1})
    with engine.connect() as conn:
        row = conn.execute(select(INBOX_EVENTS)).one()
    assert row.body == body  # raw bytes exactly as received
    assert row.status == "pending" and row.origin == "webhook" and row.attempts == 0
    assert row.received_at.tzinfo is not None
    sig_headers = {
        "stripe-signature",
        "x-hub-signature-256",
        "x-shopify-hmac-sha256",
        "webhook-signature",
        "x-acme-signature",
    }
    stored_sig = [v for k, v in row.headers.items() if k in sig_headers]
    assert stored_sig == [MASK]


def test_shopify_keeps_event_id_topic_and_triggered_at(receiver: str, engine: Engine) -> None:
    headers, body = shopify_delivery(webhook_id="wh-1", topic="orders/paid")
    httpx.post(f"{receiver}/webhooks/shopify", content=body, headers=headers).raise_for_status()
    with engine.connect() as conn:
        row = conn.execute(select(INBOX_EVENTS)).one()
        delivery = conn.execute(select(DELIVERIES.c.delivery_id)).scalar_one()
    assert (
        row.event_id == f"orders/paid:{headers['X-Shopify-Event-Id']}"
        and row.event_type == "orders/paid"
        and row.object_id == "820982911946154508"
    )
    assert delivery == "wh-1"  # the webhook id stays the delivery's own
    assert row.headers["x-shopify-event-id"] == headers["X-Shopify-Event-Id"]
    assert row.headers["x-shopify-triggered-at"] == headers["X-Shopify-Triggered-At"]


def _resigned(headers: dict[str, str], body: bytes) -> dict[str, str]:
    return {**headers, "X-Shopify-Hmac-Sha256": shopify_sign(body, SECRETS["shopify"])}


def test_shopify_one_event_id_of_one_topic_is_one_event_across_subscriptions(
    receiver: str, engine: Engine
) -> None:
    """Two subscriptions to one topic: two deliveries, their own webhook ids, one event id
    (https://shopify.dev/docs/apps/build/webhooks/ignore-duplicates)."""
    headers, body = shopify_delivery(webhook_id="wh-sub-1", topic="orders/create")
    other = {**headers, "X-Shopify-Webhook-Id": "wh-sub-2"}
    with httpx.Client(base_url=receiver) as client:
        first = client.post("/webhooks/shopify", content=body, headers=headers)
        second = client.post("/webhooks/shopify", content=body, headers=other)
        # the same merchant action's other topic is its own event
        paid_headers = {
            **headers,
            "X-Shopify-Topic": "orders/paid",
            "X-Shopify-Webhook-Id": "wh-paid",
        }
        paid = client.post("/webhooks/shopify", content=body, headers=paid_headers)
        # a changed body under the same topic and event id is a conflict, not a new event
        changed = json.dumps({"id": 820982911946154508, "updated_at": "2026-11-30T11:00:00Z"})
        third = client.post(
            "/webhooks/shopify",
            content=changed.encode(),
            headers=_resigned({**headers, "X-Shopify-Webhook-Id": "wh-sub-3"}, changed.encode()),
        )
    assert [r.json()["status"] for r in (first, second, paid, third)] == [
        "accepted",
        "duplicate",
        "accepted",
        "conflict",
    ]
    event = headers["X-Shopify-Event-Id"]
    assert second.json()["event_id"] == first.json()["event_id"] == f"orders/create:{event}"
    assert counts(engine) == (2, {"accepted": 2, "duplicate": 1, "conflict": 1})
    with engine.connect() as conn:
        ids = conn.execute(select(DELIVERIES.c.delivery_id).order_by(DELIVERIES.c.id)).scalars()
        assert list(ids) == ["wh-sub-1", "wh-sub-2", "wh-paid", "wh-sub-3"]


def test_shopify_without_an_event_id_is_named_by_its_webhook_id(
    receiver: str, engine: Engine
) -> None:
    headers, body = shopify_delivery(webhook_id="wh-alone")
    del headers["X-Shopify-Event-Id"]
    answer = httpx.post(f"{receiver}/webhooks/shopify", content=body, headers=headers)
    assert answer.json() == {"status": "accepted", "event_id": "wh-alone"}
    again = {**headers, "X-Shopify-Webhook-Id": "wh-other"}
    second = httpx.post(f"{receiver}/webhooks/shopify", content=body, headers=again)
    assert second.json() == {"status": "accepted", "event_id": "wh-other"}


def _counting_registry(calls: list[str]) -> HandlerRegistry:
    registry = HandlerRegistry()

    def count(event: Any, conn: Any) -> None:
        calls.append(event.event_id)

    registry.register("stripe", "*", count)
    return registry


def test_same_delivery_ten_times(receiver: str, engine: Engine, db_url: str) -> None:
    headers, body = stripe_delivery("evt_ten")
    with httpx.Client(base_url=receiver) as client:
        statuses = [
            client.post("/webhooks/stripe", content=body, headers=headers).json()["status"]
            for _ in range(10)
        ]
    assert statuses == ["accepted"] + ["duplicate"] * 9
    assert counts(engine) == (1, {"accepted": 1, "duplicate": 9})
    calls: list[str] = []
    Worker(engine, make_settings(db_url), _counting_registry(calls)).drain()
    assert calls == ["evt_ten"]


def test_fifty_concurrent_identical_deliveries(receiver: str, engine: Engine, db_url: str) -> None:
    headers, body = stripe_delivery("evt_race")

    async def blast() -> list[str]:
        async with httpx.AsyncClient(
            base_url=receiver, limits=httpx.Limits(max_connections=50)
        ) as client:
            responses = await asyncio.gather(
                *(client.post("/webhooks/stripe", content=body, headers=headers) for _ in range(50))
            )
        return [r.json()["status"] for r in responses]

    statuses = asyncio.run(blast())
    assert sorted(statuses) == ["accepted"] + ["duplicate"] * 49
    assert counts(engine) == (1, {"accepted": 1, "duplicate": 49})
    calls: list[str] = []
    Worker(engine, make_settings(db_url), _counting_registry(calls)).drain()
    assert calls == ["evt_race"]


def _reject_cases() -> list[tuple[str, str, dict[str, str], bytes, int, str]]:
    cases = []
    h, b = stripe_delivery()
    cases.append(("unknown source", "paypal", h, b, 404, "unknown source"))
    cases.append(
        (
            "missing signature",
            "stripe",
            {"Content-Type": "application/json"},
            b,
            401,
            "missing header Stripe-Signature",
        )
    )
    h2 = dict(h, **{"Stripe-Signature": h["Stripe-Signature"][:-4] + "0000"})
    cases.append(("wrong signature", "stripe", h2, b, 401, "does not match"))
    h, b = stripe_delivery(timestamp=int(time.time()) - 3600)
    cases.append(("stale stripe timestamp", "stripe", h, b, 401, "tolerance"))
    h, b = standard_delivery(timestamp=int(time.time()) + 3600)
    cases.append(("future standard timestamp", "svix", h, b, 401, "too new"))
    from connectors.providers.github.signature import github_sign
    from connectors.providers.stripe.signature import stripe_sign

    garbage = b"{not json"
    now = int(time.time())
    cases.append(
        (
            "unparsable JSON",
            "stripe",
            {"Stripe-Signature": stripe_sign(garbage, "whsec_test_secret", now)},
            garbage,
            400,
            "not valid JSON",
        )
    )
    no_id = json.dumps({"object": "event", "type": "x"}).encode()
    cases.append(
        (
            "missing id in body",
            "stripe",
            {"Stripe-Signature": stripe_sign(no_id, "whsec_test_secret", now)},
            no_id,
            400,
            "missing event id",
        )
    )
    h, b = github_delivery()
    del h["X-GitHub-Delivery"]
    cases.append(("missing github delivery id", "github", h, b, 400, "X-GitHub-Delivery"))
    big = b"x" * 2048
    cases.append(
        (
            "body too large",
            "github",
            {"X-Hub-Signature-256": github_sign(big, "It's a Secret to Everybody")},
            big,
            413,
            "larger than 1024",
        )
    )
    return cases


@pytest.mark.parametrize(
    "name, source, headers, body, status, reason",
    _reject_cases(),
    ids=[c[0] for c in _reject_cases()],
)
def test_rejected_input_leaves_only_a_rejected_delivery(
    db_url: str,
    engine: Engine,
    serve: Any,
    name: str,
    source: str,
    headers: dict[str, str],
    body: bytes,
    status: int,
    reason: str,
) -> None:
    from connectors.providers.stripe.signature import stripe_sign

    if source == "stripe" and status == 400:
        # a valid signature, signed now: the cases are built at collection, maybe minutes ago
        headers = dict(
            headers,
            **{"Stripe-Signature": stripe_sign(body, "whsec_test_secret", int(time.time()))},
        )
    app = create_app(make_settings(db_url, receiver={"max_body_bytes": 1024}), engine)
    url = serve(app).url
    response = httpx.post(f"{url}/webhooks/{source}", content=body, headers=headers)
    assert response.status_code == status
    assert response.json()["status"] == "rejected"
    assert reason in response.json()["reason"]
    assert counts(engine) == (0, {"rejected": 1})
    with engine.connect() as conn:
        row = conn.execute(select(DELIVERIES)).one()
    assert row.status_code == status and reason in row.reason and row.source == source
    assert row.remote_addr == "127.0.0.1"


def test_chunked_body_over_the_limit_is_413(db_url: str, engine: Engine, serve: Any) -> None:
    app = create_app(make_settings(db_url, receiver={"max_body_bytes": 1024}), engine)
    url = serve(app).url

    def chunks() -> Any:
        for _ in range(100):
            yield b"y" * 100

    response = httpx.post(
        f"{url}/webhooks/github", content=chunks(), headers={"X-Hub-Signature-256": "sha256=00"}
    )
    assert response.status_code == 413
    assert counts(engine) == (0, {"rejected": 1})


def test_healthz_and_metrics(receiver: str, engine: Engine) -> None:
    from tests.dashboard_data import seed

    seed(engine)  # two open stripe discrepancies (missing, diverged), one resolved
    headers, body = github_delivery("g-1")
    with httpx.Client(base_url=receiver) as client:
        client.post("/webhooks/github", content=body, headers=headers)
        client.post("/webhooks/github", content=body, headers=headers)
        client.post("/webhooks/github", content=b"{}", headers={"X-Hub-Signature-256": "sha256=00"})
        assert client.get("/healthz").json() == {"status": "ok"}
        text = client.get("/metrics").text
    assert 'hookledger_deliveries_total{outcome="accepted",source="github"} 1.0' in text
    assert 'hookledger_deliveries_total{outcome="duplicate",source="github"} 1.0' in text
    assert 'hookledger_deliveries_total{outcome="rejected",source="github"} 1.0' in text
    assert 'hookledger_events{source="github",status="pending"} 1.0' in text
    assert 'hookledger_unprocessed_events{source="github"} 1.0' in text
    assert 'hookledger_open_discrepancies{kind="missing",source="stripe"} 1.0' in text
    assert 'hookledger_open_discrepancies{kind="diverged",source="stripe"} 1.0' in text
    assert 'kind="unapplied"' not in text  # resolved
    assert 'hookledger_oldest_unprocessed_age_seconds{source="github"}' in text
    # what the alert rules need: the 401 counted by status, the ack latency of what was stored,
    # the process's own metrics, and configured sources' gauges at 0 rather than absent
    assert 'hookledger_rejected_deliveries_total{source="github",status="401"} 1.0' in text
    assert 'hookledger_ack_seconds_count{source="github"} 2.0' in text
    assert "process_resident_memory_bytes " in text
    assert 'hookledger_unprocessed_events{source="shopify"} 0.0' in text
    assert 'hookledger_oldest_unprocessed_age_seconds{source="svix"} 0.0' in text
    assert 'hookledger_events{source="svix",status="dead"} 0.0' in text
    assert 'hookledger_reconciliation_last_success_timestamp_seconds{source="svix"} 0.0' in text
    assert 'hookledger_reconciliation_last_new_discrepancies{source="github"} 0.0' in text


def test_storage_failure_is_not_acknowledged(tmp_path: Path, serve: Any) -> None:
    """An event that could not be stored must not get a 2xx: the provider has to retry."""
    unmigrated = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    url = serve(create_app(make_settings(), unmigrated)).url
    headers, body = stripe_delivery()
    response = httpx.post(f"{url}/webhooks/stripe", content=body, headers=headers)
    assert response.status_code == 503
    assert response.json() == {"status": "error", "reason": "storage unavailable"}
    assert response.headers["retry-after"] == "5"  # every 503 says when to send it again
    assert (
        httpx.get(f"{url}/healthz").status_code == 200
    )  # the database answers; the table is missing
    assert "hookledger_database_up 0.0" in httpx.get(f"{url}/metrics").text
    unmigrated.dispose()


def test_unknown_route_uses_the_error_shape(receiver: str) -> None:
    response = httpx.get(f"{receiver}/webhooks/stripe")
    assert response.status_code == 405
    assert response.json()["status"] == "error"


def test_the_correlation_id_comes_from_the_request_and_reaches_the_handler(
    receiver: str, engine: Engine, db_url: str
) -> None:
    seen: dict[str, str] = {}
    registry = HandlerRegistry()
    registry.register(
        "stripe", "*", lambda event, conn: seen.update({event.event_id: event.correlation_id})
    )
    with httpx.Client(base_url=receiver) as client:
        headers, body = stripe_delivery("evt_corr")
        client.post(
            "/webhooks/stripe", content=body, headers={**headers, "X-Correlation-Id": "order-77"}
        )
        headers, body = stripe_delivery("evt_bad")
        bad = client.post(
            "/webhooks/stripe", content=body, headers={**headers, "X-Request-Id": "a b\tc"}
        )
        assert bad.json()["status"] == "accepted"  # a bad header never refuses a delivery
    Worker(engine, make_settings(db_url), registry).drain()
    assert seen["evt_corr"] == "order-77"
    assert len(seen["evt_bad"]) == 32 and seen["evt_bad"] != "a b\tc"  # minted instead


def test_an_outage_logs_its_failure_once_not_a_traceback_a_request(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    from reconciler.logs import configure_logging

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    configure_logging("INFO", "json")
    unmigrated = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")  # every store fails alike
    try:
        url = serve(create_app(make_settings(), unmigrated)).url
        with httpx.Client(base_url=url) as client:
            for i in range(30):
                headers, body = stripe_delivery(f"evt_{i}")
                assert (
                    client.post("/webhooks/stripe", content=body, headers=headers).status_code
                    == 503
                )
    finally:
        configure_logging("INFO")
        unmigrated.dispose()
    failures = [line for line in err.getvalue().splitlines() if "storing a delivery failed" in line]
    assert len(failures) == 1, failures  # the rest held back and counted, logged a minute later
    record = json.loads(failures[0])
    assert record["source"] == "stripe" and "Traceback" in record["exc_info"]


def test_a_github_hook_with_the_form_content_type_is_typed_and_decoded(
    receiver: str, engine: Engine, db_url: str
) -> None:
    """Issue 35: a form-encoded GitHub delivery was typed `issues` (not `issues.opened`) and its
    handler failed on json.loads."""
    from urllib.parse import urlencode

    from sqlalchemy import Connection

    from connectors.providers.github.signature import github_sign
    from reconciler.inbox.handlers import Event
    from tests.conftest import SECRETS

    document = {"action": "opened", "issue": {"id": 7, "title": "x"}, "repository": {"id": 42}}
    body = urlencode({"payload": json.dumps(document)}).encode()
    answer = httpx.post(
        f"{receiver}/webhooks/github",
        content=body,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": "form-delivery-1",
            "X-Hub-Signature-256": github_sign(body, SECRETS["github"]),
        },
    )
    assert answer.status_code == 200 and answer.json()["status"] == "accepted"
    seen: list[Any] = []

    def on_issue(event: Event, conn: Connection) -> None:
        seen.append((event.event_type, event.payload))

    registry = HandlerRegistry()
    registry.register("github", "*", on_issue)
    worker = Worker(engine, make_settings(db_url), registry)
    worker.drain()
    worker.close()
    assert seen == [("issues.opened", document)]
