"""Strangers cannot stall intake through a source confirmed by the provider's API (GoPay), over real
loopback sockets on SQLite and PostgreSQL.

GoPay's notification is an unsigned GET, so anyone can send one, and each well-formed id costs a call
to GoPay's API (here the sandbox, answering after 300 ms as GoPay's API might). While 300 such GETs
are in flight all the time, signed Stripe deliveries to the same receiver are all accepted with a p99
under a second; GoPay is asked about each id at most once; malformed ids cost no call; the excess
is answered 503 with Retry-After at once; and the deliveries table grows by a bounded number of rows.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
from collections import Counter
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select

from connectors.sandbox.app import Sandbox
from connectors.sandbox.common import Faults
from connectors.sandbox.world import build_world
from reconciler.inbox.receiver import create_app
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS
from tests.conftest import RunningServer, make_settings, start_server
from tests.deliveries import stripe_delivery
from tests.strangers import flood

IN_FLIGHT = 300  # strangers' GETs kept in flight at every moment
FLOOD_SECONDS = 4.0
STRIPE_SENDERS, STRIPE_EACH = 4, 30
PAYMENT_PREFIX = "/api/payments/payment/"


@pytest.fixture(autouse=True)
def _gopay_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_GOPAY_ID", "1234567890")
    monkeypatch.setenv("T_GOPAY_SECRET", "sandbox-gopay-secret")


@pytest.fixture
def gopay_api() -> Any:
    world = build_world(4, stripe_events=0, github_deliveries=0, shopify_orders=0, gopay_payments=3)
    sandbox = Sandbox(world, faults=Faults(latency_ms=300))
    server: RunningServer = start_server(sandbox.app)
    yield sandbox, server.url
    server.stop()


def _receiver(db_url: str, engine: Engine, serve: Any, api_url: str, **receiver: Any) -> str:
    sources = [
        {"name": "stripe", "kind": "stripe", "signing_secret_env": "T_STRIPE_SECRET"},
        {
            "name": "gopay",
            "kind": "gopay",
            "base_url": api_url,
            "client_id_env": "T_GOPAY_ID",
            "client_secret_env": "T_GOPAY_SECRET",
        },
    ]
    settings = make_settings(db_url, sources=sources, receiver=receiver)
    return str(serve(create_app(settings, engine)).url)


def _payment_calls(sandbox: Sandbox) -> dict[str, int]:
    routes = dict(sandbox.stats.by_route)
    return {path: n for path, n in routes.items() if path.startswith(PAYMENT_PREFIX)}


async def _signed_stripe(url: str) -> list[tuple[int, float]]:
    """Signed Stripe deliveries sent while the flood runs: (status, seconds) each."""
    results: list[tuple[int, float]] = []

    async def sender(client: httpx.AsyncClient, n: int) -> None:
        for i in range(STRIPE_EACH):
            headers, body = stripe_delivery(f"evt_flood_{n}_{i}")
            started = time.perf_counter()
            got = await client.post(f"{url}/webhooks/stripe", content=body, headers=headers)
            results.append((got.status_code, time.perf_counter() - started))
            await asyncio.sleep(FLOOD_SECONDS / STRIPE_EACH / 2)

    async with httpx.AsyncClient(timeout=30) as client:
        await asyncio.gather(*(sender(client, n) for n in range(STRIPE_SENDERS)))
    return results


def _under_flood(url: str, first_id: int) -> tuple[Counter[Any], int, list[Any]]:
    context = multiprocessing.get_context("spawn")
    out, ready = context.Queue(), context.Event()
    strangers = context.Process(
        target=flood,
        args=(url, first_id, IN_FLIGHT, FLOOD_SECONDS + 1.5, ready, out),
        daemon=True,
    )
    strangers.start()
    try:
        assert ready.wait(timeout=60), "the strangers' process did not start within 60 s"
        time.sleep(1.0)  # the flood is at full height before the first delivery
        stripe = asyncio.run(_signed_stripe(url))
        # each stranger's last GET may take up to its 30 s timeout
        answers, sent = out.get(timeout=90)
    finally:
        strangers.join(timeout=10)
        if strangers.is_alive():
            strangers.kill()
    return answers, sent, stripe


def test_strangers_flooding_gopay_neither_refuse_nor_slow_signed_deliveries_of_another_source(
    db_url: str, engine: Engine, serve: Any, gopay_api: Any
) -> None:
    sandbox, api_url = gopay_api
    url = _receiver(db_url, engine, serve, api_url)
    # well-formed ids GoPay does not know
    answers, sent, stripe = _under_flood(url, first_id=3_900_000_000)

    seconds = sorted(s for _, s in stripe)
    p99 = seconds[max(0, int(len(seconds) * 0.99) - 1)]
    calls = _payment_calls(sandbox)
    print(
        f"figures: {sum(answers.values())} stranger GETs ({IN_FLIGHT} in flight), answers "
        f"{dict(answers)}; {len(stripe)} signed Stripe deliveries: median "
        f"{statistics.median(seconds) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max "
        f"{seconds[-1] * 1000:.0f} ms; GoPay asked {sum(calls.values())} times for {sent} ids"
    )
    assert {status for status, _ in stripe} == {200}  # never refused
    assert p99 <= 1.0
    # each id asked about once at most, and only ids a stranger sent
    assert calls and max(calls.values()) == 1 and sum(calls.values()) <= sent
    # the excess waited nowhere: answered 503 with Retry-After, or 400 for an unknown payment
    assert set(answers) <= {(400, False), (503, True)}
    assert answers[503, True] > 0
    with engine.connect() as conn:
        logged = conn.execute(
            select(func.count()).select_from(DELIVERIES).where(DELIVERIES.c.source == "gopay")
        ).scalar_one()
        stored = conn.execute(
            select(func.count()).select_from(INBOX_EVENTS).where(INBOX_EVENTS.c.source == "gopay")
        ).scalar_one()
    assert stored == 0
    assert logged <= 60  # [receiver] rejected_log_per_minute for one address, the rest counted


def test_a_malformed_id_costs_no_call_and_an_unknown_one_is_asked_about_once_per_window(
    db_url: str, engine: Engine, serve: Any, gopay_api: Any
) -> None:
    sandbox, api_url = gopay_api
    url = _receiver(db_url, engine, serve, api_url, confirm_window_seconds=60)
    known = sorted(sandbox.world.gopay_payments)[0]
    malformed = ["12a", "\uff13", "\u00b2", "-1", "1" * 20, "1 2", "1e3", "0x10", "", "1/2"]
    with httpx.Client(timeout=10) as client:
        for bad in malformed:
            got = client.get(f"{url}/webhooks/gopay", params={"id": bad})
            assert got.status_code == 400, (bad, got.text)
        assert _payment_calls(sandbox) == {}
        first = client.get(f"{url}/webhooks/gopay", params={"id": "3999999999"})
        again = client.get(f"{url}/webhooks/gopay", params={"id": "3999999999"})
        assert first.status_code == again.status_code == 400
        assert "does not know payment 3999999999" in again.json()["reason"]
        assert client.get(f"{url}/webhooks/gopay", params={"id": known}).status_code == 200
        # a known payment asked about again within the window: sent again later, read afresh
        soon = client.get(f"{url}/webhooks/gopay", params={"id": known})
        assert soon.status_code == 503 and 1 <= int(soon.headers["retry-after"]) <= 60
    assert _payment_calls(sandbox) == {
        f"{PAYMENT_PREFIX}3999999999": 1,
        f"{PAYMENT_PREFIX}{known}": 1,
    }


def test_concurrent_notifications_of_one_payment_share_one_call(
    db_url: str, engine: Engine, serve: Any, gopay_api: Any
) -> None:
    sandbox, api_url = gopay_api
    url = _receiver(db_url, engine, serve, api_url)
    known = sorted(sandbox.world.gopay_payments)[0]

    async def together() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=10) as client:
            return await asyncio.gather(
                *(client.get(f"{url}/webhooks/gopay", params={"id": known}) for _ in range(10))
            )

    answers = asyncio.run(together())
    statuses = Counter(a.json()["status"] for a in answers)
    assert statuses == {"accepted": 1, "duplicate": 9}
    assert _payment_calls(sandbox) == {f"{PAYMENT_PREFIX}{known}": 1}
