"""GoPay over real loopback HTTP: an unsigned GET notification confirmed by reading the payment from
the (sandbox) GoPay API with an OAuth client-credentials token, stored as what the API answered;
reconciliation reads back the payments the inbox knows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from connectors.providers.gopay import rule
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import World, build_world
from reconciler.config import Settings, parse_settings
from reconciler.inbox.receiver import create_app
from reconciler.reconcile.run import Reconciler
from reconciler.storage.models import DELIVERIES, DISCREPANCIES, INBOX_EVENTS
from tests.conftest import RunningServer, start_server

CLIENT_ID, CLIENT_SECRET = "1234567890", "sandbox-gopay-secret"


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_GOPAY_ID", CLIENT_ID)
    monkeypatch.setenv("T_GOPAY_SECRET", CLIENT_SECRET)


def _world(n: int = 12) -> World:
    return build_world(4, stripe_events=0, github_deliveries=0, shopify_orders=0, gopay_payments=n)


@pytest.fixture
def box() -> Iterator[tuple[Sandbox, RunningServer]]:
    sandbox = Sandbox(_world())
    server = start_server(sandbox.app)
    yield sandbox, server
    server.stop()


def _settings(
    db_url: str, sandbox_url: str, receiver: dict[str, Any] | None = None, **extra: Any
) -> Settings:
    entry = {
        "name": "gopay",
        "kind": "gopay",
        "base_url": sandbox_url,
        "client_id_env": "T_GOPAY_ID",
        "client_secret_env": "T_GOPAY_SECRET",
        **extra,
    }
    tables = {"database": {"url": db_url}, "receiver": receiver or {}, "sources": [entry]}
    return parse_settings(tables, "<test>")


# each notification reads the payment afresh (the sandbox's payments move on faster than the
# window that keeps strangers from costing calls)
NO_WINDOW = {"confirm_window_seconds": 0}


def _stored(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one())


def test_a_notification_is_stored_as_the_payment_gopay_shows_once_per_state(
    db_url: str, engine: Engine, serve: Any, box: tuple[Sandbox, RunningServer]
) -> None:
    sandbox, server = box
    receiver = serve(create_app(_settings(db_url, server.url, NO_WINDOW), engine))
    url = f"{receiver.url}/webhooks/gopay"
    first, second = sorted(sandbox.world.gopay_payments)[:2]
    state = sandbox.world.gopay_payments[first]["state"]
    with httpx.Client(timeout=10) as client:
        got = client.get(url, params={"id": first})
        assert got.status_code == 200, got.text
        assert got.json() == {"status": "accepted", "event_id": f"{first}:{state}"}
        assert client.get(url, params={"id": first}).json()["status"] == "duplicate"
        assert client.get(url, params={"id": second}).status_code == 200
        # the payment moves on: its next notification is an event of its own
        sandbox.world.gopay_payments[first] = {
            **sandbox.world.gopay_payments[first],
            "state": "REFUNDED",
        }
        again = client.get(url, params={"id": first})
        assert again.json() == {"status": "accepted", "event_id": f"{first}:REFUNDED"}
        # a POST is not how GoPay notifies
        refused = client.post(url, params={"id": first})
        assert refused.status_code == 405 and "GET" in refused.json()["reason"]
    with engine.connect() as conn:
        row = conn.execute(
            select(INBOX_EVENTS.c.event_type, INBOX_EVENTS.c.object_id, INBOX_EVENTS.c.body).where(
                INBOX_EVENTS.c.event_id == f"{first}:{state}"
            )
        ).one()
    assert (row.event_type, row.object_id) == (f"payment.{state}", first)
    assert b'"order_number"' in bytes(row.body)  # the payment as GoPay showed it, not the GET
    assert _stored(engine) == 3
    assert sandbox.stats.by_route["gopay tokens"] == 1  # one token for every confirmation


def test_an_unknown_payment_or_a_broken_query_is_refused_and_nothing_is_stored(
    db_url: str, engine: Engine, serve: Any, box: tuple[Sandbox, RunningServer]
) -> None:
    _, server = box
    receiver = serve(create_app(_settings(db_url, server.url), engine))
    url = f"{receiver.url}/webhooks/gopay"
    with httpx.Client(timeout=10) as client:
        unknown = client.get(url, params={"id": "3999999999"})
        assert unknown.status_code == 400
        assert "does not know payment 3999999999" in unknown.json()["reason"]
        assert client.get(url).status_code == 400  # no id
        assert client.get(url, params={"id": "../admin"}).status_code == 400
    assert _stored(engine) == 0
    with engine.connect() as conn:
        logged = conn.execute(select(func.count()).select_from(DELIVERIES)).scalar_one()
    assert logged == 3  # each refusal is in the delivery log


def test_gopays_api_refusing_the_credentials_is_a_503_so_gopay_notifies_again(
    db_url: str,
    engine: Engine,
    serve: Any,
    box: tuple[Sandbox, RunningServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sandbox, server = box
    monkeypatch.setenv("T_GOPAY_SECRET", "wrong")
    receiver = serve(create_app(_settings(db_url, server.url), engine))
    with httpx.Client(timeout=10) as client:
        got = client.get(
            f"{receiver.url}/webhooks/gopay",
            params={"id": next(iter(sandbox.world.gopay_payments))},
        )
    assert got.status_code == 503
    assert "could not confirm" in got.json()["reason"]
    assert _stored(engine) == 0


@given(query=st.lists(st.tuples(st.text(max_size=8), st.text(max_size=16)), max_size=4))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_query_is_answered_4xx_and_stores_nothing(
    query: list[tuple[str, str]], gopay_receiver: tuple[str, Engine]
) -> None:
    url, engine = gopay_receiver
    before = _stored(engine)
    got = httpx.get(url, params=query, timeout=10)
    assert got.status_code in (400, 200) and got.json().get("reason") != ""
    if got.status_code == 200:  # only a known payment's id is accepted
        ids = [v for k, v in query if k == "id"]
        assert ids and ids[0].isdigit()
    else:
        assert _stored(engine) == before


@pytest.fixture(scope="module")
def gopay_receiver() -> Iterator[tuple[str, Engine]]:
    from reconciler.storage.engine import make_engine
    from reconciler.storage.migrate import upgrade

    mp = pytest.MonkeyPatch()
    mp.setenv("T_GOPAY_ID", CLIENT_ID)
    mp.setenv("T_GOPAY_SECRET", CLIENT_SECRET)
    sandbox = start_server(Sandbox(_world(3)).app)
    engine = make_engine("sqlite://")
    upgrade(engine)
    receiver = start_server(create_app(_settings("sqlite://", sandbox.url), engine))
    yield f"{receiver.url}/webhooks/gopay", engine
    receiver.stop()
    sandbox.stop()
    engine.dispose()
    mp.undo()


def test_reconciliation_reads_back_the_known_payments_and_finds_an_unnotified_state(
    db_url: str, engine: Engine, serve: Any
) -> None:
    """Every payment notified in each state it went through, but a few final notifications never
    came: reading the known payments back finds exactly those missing."""
    world = _world(20)
    sandbox = start_server(Sandbox(world).app)
    try:
        settings_ = _settings(db_url, sandbox.url, NO_WINDOW, initial_lookback_hours=2)
        receiver = serve(create_app(settings_, engine))
        url = f"{receiver.url}/webhooks/gopay"
        final = {pid: p["state"] for pid, p in world.gopay_payments.items()}
        unnotified = sorted(final)[::6]  # their last state was never notified
        with httpx.Client(timeout=10) as client:
            for pid, path in world.gopay_paths.items():
                for state in path:
                    if pid in unnotified and state == path[-1]:
                        continue
                    world.gopay_payments[pid] = {**world.gopay_payments[pid], "state": state}
                    assert client.get(url, params={"id": pid}).status_code == 200
        for pid, state in final.items():
            world.gopay_payments[pid] = {**world.gopay_payments[pid], "state": state}
        Reconciler(engine, settings_).run("gopay")
        with engine.connect() as conn:
            rows = conn.execute(select(DISCREPANCIES.c.kind, DISCREPANCIES.c.event_id)).all()
    finally:
        sandbox.stop()
    assert {(r.kind, r.event_id) for r in rows} == {
        ("missing", f"{pid}:{final[pid]}") for pid in unnotified
    }


def test_doctor_gets_a_token_with_the_sources_oauth_client(
    box: tuple[Sandbox, RunningServer], tmp_path: Any
) -> None:
    from reconciler.ops.doctor import diagnose

    config = tmp_path / "config.toml"
    config.write_text(
        f"""
[database]
url = "sqlite:///{tmp_path / "db.sqlite"}"

[[sources]]
name = "gopay"
kind = "gopay"
base_url = "{box[1].url}"
client_id_env = "T_GOPAY_ID"
client_secret_env = "T_GOPAY_SECRET"
"""
    )
    env = {"T_GOPAY_ID": CLIENT_ID, "T_GOPAY_SECRET": CLIENT_SECRET}
    mine = [v for v in diagnose(str(config), environ=env) if v.check == "source 'gopay'"]
    assert [v.status for v in mine] == ["pass"] and "payment-all" in mine[0].detail
    wrong = diagnose(str(config), environ={**env, "T_GOPAY_SECRET": "x"})
    assert [v.status for v in wrong if v.check == "source 'gopay'"] == ["fail"]


def test_a_gopay_source_needs_both_oauth_variables() -> None:
    assert rule({"kind": "gopay", "client_id_env": "A", "client_secret_env": "B"}) is None
    assert "client_secret_env" in (rule({"kind": "gopay", "client_id_env": "A"}) or "")
    with pytest.raises(Exception, match="client_id_env"):
        parse_settings({"sources": [{"name": "g", "kind": "gopay"}]}, "<test>")
