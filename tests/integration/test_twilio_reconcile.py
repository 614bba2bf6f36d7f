"""Twilio reconciled: its Messages and Calls lists read through the sandbox over loopback HTTP (which
twilio's own client reads too), the status callbacks they stand for compared with the inbox, and the
business table's status with the resource's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select, update
from twilio.rest import Client

from connectors.base import Record, ScanOptions
from connectors.errors import AuthError, NotFoundError
from connectors.providers.twilio.api import LISTS, resource_record, rule, twilio_time
from connectors.sandbox.app import Keys, Sandbox
from connectors.sandbox.sender import DeliveryFaults, plan, send, twilio_webhooks
from connectors.sandbox.world import TWILIO_ACCOUNT, World, build_world
from reconciler.config import parse_settings
from reconciler.demo.business import metadata as demo_metadata
from reconciler.demo.business import sms
from reconciler.demo.handlers import register as register_demo
from reconciler.inbox.handlers import HandlerRegistry
from reconciler.inbox.receiver import create_app
from reconciler.inbox.worker import Worker
from reconciler.reconcile.run import Reconciler
from reconciler.sources import build_connector
from reconciler.storage.models import DISCREPANCIES
from tests.conftest import RunningServer, start_server

NOW = datetime.now(UTC).replace(microsecond=0)
TOKEN = "sandbox-twilio-auth-token"


def _world(messages: int = 40, calls: int = 12, seed: int = 5) -> World:
    return build_world(
        seed,
        now=NOW - timedelta(minutes=20),
        stripe_events=0,
        github_deliveries=0,
        shopify_orders=0,
        twilio_messages=messages,
        twilio_calls=calls,
    )


@pytest.fixture
def box() -> Iterator[tuple[Sandbox, RunningServer]]:
    sandbox = Sandbox(_world(), keys=Keys(twilio_api_keys={"SK" + "1" * 32: "key-secret"}))
    server = start_server(sandbox.app)
    yield sandbox, server
    server.stop()


def _source(url: str, **extra: Any) -> Any:
    entry = {
        "name": "tw",
        "kind": "twilio",
        "base_url": url,
        "api_key_env": "T_TWILIO_TOKEN",
        "signing_secret_env": "T_TWILIO_TOKEN",
        "account_sid": TWILIO_ACCOUNT,
        **extra,
    }
    return parse_settings({"sources": [entry]}, "<test>").sources[0]


def _scan(connector: Any, cursor: Any = None) -> tuple[list[Record], Any, int]:
    records: list[Record] = []
    pages = 0
    for page in connector.pages(cursor, ScanOptions(now=NOW, initial_lookback=timedelta(days=2))):
        records.extend(page.records)
        cursor = page.cursor
        pages += 1
    return records, cursor, pages


def _expected(world: World) -> set[str]:
    items = list(world.twilio_messages.values()) + list(world.twilio_calls.values())
    return {f"{i['sid']}:{i['status']}" for i in items}


def test_the_lists_page_to_the_end_one_record_per_current_status(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, server = box
    monkeypatch.setenv("T_TWILIO_TOKEN", TOKEN)
    connector = build_connector(_source(server.url, page_size=7))
    try:
        records, cursor, pages = _scan(connector)
        assert {r.event_id for r in records} == _expected(sandbox.world)
        assert pages == -(-40 // 7) + -(-12 // 7)  # each list paged through next_page_uri
        message = next(r for r in records if r.object_type == "message")
        assert message.event_type == f"message.{message.payload['status']}"
        assert message.occurred_at == twilio_time(message.payload["date_updated"])
        # the cursor moves on: a second scan reads from the day before the newest date
        newest = max(
            twilio_time(m["date_sent"]) or NOW for m in sandbox.world.twilio_messages.values()
        )
        assert datetime.fromisoformat(cursor["Messages"]["since"]) == newest
        before = sandbox.stats.calls
        again, _, _ = _scan(connector, cursor)
        assert {r.event_id for r in again} <= _expected(sandbox.world)
        assert sandbox.stats.by_route  # the resumed scan asked with the narrower filter
        assert sandbox.stats.calls > before
        # one of each fetched by id; a callback id whose status has passed is not found
        sid = message.object_id or ""
        assert connector.fetch_object("message", sid)["sid"] == sid
        assert connector.fetch_event(f"{sid}:{message.payload['status']}").event_id
        with pytest.raises(NotFoundError, match="keeps only the current status"):
            connector.fetch_event(f"{sid}:queued")
    finally:
        connector.close()


def test_twilios_own_client_reads_the_sandbox_lists_as_the_connector_does(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox speaks Twilio's API: twilio-python pages it (its own filter names and paging)
    and finds what hookledger's connector finds."""
    sandbox, server = box
    client = Client(TWILIO_ACCOUNT, TOKEN)
    client.api.base_url = server.url
    since = NOW - timedelta(days=2)
    listed = client.api.v2010.accounts(TWILIO_ACCOUNT).messages.list(
        date_sent_after=since, page_size=9
    )
    calls = client.api.v2010.accounts(TWILIO_ACCOUNT).calls.list(
        start_time_after=since, page_size=5
    )
    assert {m.sid for m in listed} == set(sandbox.world.twilio_messages)
    assert {c.sid for c in calls} == set(sandbox.world.twilio_calls)
    assert {m.status for m in listed} <= set(LISTS["messages"].reported)
    monkeypatch.setenv("T_TWILIO_TOKEN", TOKEN)
    connector = build_connector(_source(server.url, page_size=9))
    try:
        records, _, _ = _scan(connector)
    finally:
        connector.close()
    assert {r.object_id for r in records} == {m.sid for m in listed} | {c.sid for c in calls}


def test_credentials_are_checked_with_one_read_and_named_when_wrong(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, server = box
    monkeypatch.setenv("T_TWILIO_TOKEN", TOKEN)
    connector = build_connector(_source(server.url))
    try:
        access = connector.check_access()
        assert TWILIO_ACCOUNT in access.detail
        assert any("restricted API key" in w for w in access.warnings)
    finally:
        connector.close()
    monkeypatch.setenv("T_TWILIO_TOKEN", "key-secret")
    connector = build_connector(_source(server.url, api_key_sid="SK" + "1" * 32))
    try:
        assert connector.check_access().warnings == ()
    finally:
        connector.close()
    monkeypatch.setenv("T_TWILIO_TOKEN", "wrong")
    connector = build_connector(_source(server.url))
    try:
        with pytest.raises(AuthError, match="T_TWILIO_TOKEN"):
            connector.check_access()
    finally:
        connector.close()


def test_doctor_reads_a_twilio_sources_account_and_says_a_receive_only_one_is(
    box: tuple[Sandbox, RunningServer], tmp_path: Any
) -> None:
    from reconciler.ops.doctor import diagnose

    config = tmp_path / "config.toml"
    config.write_text(
        f"""
[database]
url = "sqlite:///{tmp_path / "db.sqlite"}"

[[sources]]
name = "tw"
kind = "twilio"
base_url = "{box[1].url}"
api_key_env = "T_TWILIO_TOKEN"
signing_secret_env = "T_TWILIO_TOKEN"
account_sid = "{TWILIO_ACCOUNT}"

[[sources]]
name = "tw-in"
kind = "twilio"
signing_secret_env = "T_TWILIO_TOKEN"
"""
    )
    verdicts = diagnose(str(config), environ={"T_TWILIO_TOKEN": TOKEN})
    mine = {(v.check, v.status): v.detail for v in verdicts if "'tw" in v.check}
    assert TWILIO_ACCOUNT in mine[("source 'tw'", "pass")]
    assert "restricted API key" in mine[("source 'tw'", "warn")]
    assert "receives webhooks only" in mine[("source 'tw-in'", "skip")]
    wrong = diagnose(str(config), environ={"T_TWILIO_TOKEN": "wrong"})
    failed = [v for v in wrong if v.check == "source 'tw'" and v.status == "fail"]
    assert failed and "T_TWILIO_TOKEN" in failed[0].detail


@given(
    lists=st.lists(st.text(max_size=12), max_size=4),
    sid=st.one_of(st.none(), st.text(max_size=40)),
)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_a_twilio_sources_keys_are_refused_with_the_key_named(
    lists: list[str], sid: str | None
) -> None:
    problem = rule({"lists": lists, "account_sid": sid})
    good_lists = all(name in LISTS for name in lists)
    good_sid = sid is None or (sid.startswith("AC") and len(sid) == 34)
    assert (problem is None) == (good_lists and good_sid)
    if problem:
        assert ("'lists'" in problem) or ("'account_sid'" in problem)


@given(
    status=st.text(min_size=1, max_size=20),
    date=st.one_of(st.none(), st.text(max_size=40)),
)
def test_a_listed_resource_of_any_shape_is_a_record_or_nothing(
    status: str, date: str | None
) -> None:
    """Hostile list items: a record whose time is None when Twilio's date cannot be read."""
    record = resource_record(
        LISTS["messages"], {"sid": "SM1", "status": status, "date_updated": date}
    )
    assert record.event_id == f"SM1:{status}"
    assert record.occurred_at is None or record.occurred_at.tzinfo is not None


def test_dropped_callbacks_are_missing_and_a_wrong_business_status_diverged(
    db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The status callbacks a day sent, some dropped, received over loopback HTTP and applied by the
    demo's handler: reconciliation finds exactly the dropped callbacks of each resource's current
    status (an earlier status is gone from Twilio: not findable), and a business row whose status
    was changed by hand as diverged."""
    monkeypatch.setenv("T_TWILIO_TOKEN", TOKEN)
    world = _world(messages=30, calls=8, seed=8)
    server = start_server(Sandbox(world).app)
    try:
        settings_ = parse_settings(
            {
                "database": {"url": db_url},
                "sources": [
                    {
                        "name": "twilio",
                        "kind": "twilio",
                        "base_url": server.url,
                        "api_key_env": "T_TWILIO_TOKEN",
                        "signing_secret_env": "T_TWILIO_TOKEN",
                        "account_sid": TWILIO_ACCOUNT,
                        "page_size": 10,
                        "initial_lookback_hours": 48,
                        "checks": [
                            {
                                "object_type": "message",
                                "table": "demo_sms",
                                "key": "message_sid",
                                "fields": {"status": "status"},
                            }
                        ],
                    }
                ],
            },
            "<test>",
        )
        receiver = serve(create_app(settings_, engine))
        url = f"{receiver.url}/webhooks/twilio"
        ordered, report = plan(
            twilio_webhooks(world, TOKEN, url), DeliveryFaults(drop=0.2, duplicate=0.1), seed=3
        )
        with httpx.Client() as client:
            send(client, url, ordered, report)
        assert report.responses["200"] == len(ordered)
        demo_metadata.create_all(engine)
        handlers = HandlerRegistry()
        register_demo(handlers)
        Worker(engine, settings_, handlers).drain()
        # one business row edited by hand, away from what Twilio says
        with engine.begin() as conn:
            edited = conn.execute(select(sms.c.message_sid).limit(1)).scalar_one()
            conn.execute(update(sms).where(sms.c.message_sid == edited).values(status="queued"))
        Reconciler(engine, settings_).run("twilio")
        with engine.connect() as conn:
            rows = conn.execute(select(DISCREPANCIES)).all()
    finally:
        server.stop()
    current = _expected(world)
    dropped_final = {e for e in report.dropped if e in current}
    assert dropped_final  # the seed drops some final callbacks
    missing = {r.event_id for r in rows if r.kind == "missing"}
    assert missing == dropped_final
    diverged = [(r.object_id, r.field) for r in rows if r.kind == "diverged"]
    if f"{edited}:{world.twilio_messages[edited]['status']}" not in dropped_final:
        assert (edited, "status") in diverged
    # everything else agrees: no finding names a message whose last callback arrived
    assert {oid for oid, _ in diverged} <= {edited} | {e.split(":")[0] for e in dropped_final}
