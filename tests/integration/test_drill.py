"""hookledger drill: stored events delivered again, shuffled, compared with each applied once (the
inbox on SQLite and PostgreSQL; scratch business databases on SQLite; a staging receiver over real
loopback HTTP)."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Column, Connection, Engine, Integer, MetaData, String, Table, insert, update

from connectors.providers.stripe.signature import parse_stripe
from reconciler.cli.main import main
from reconciler.config import Settings
from reconciler.errors import ConfigError
from reconciler.inbox.handlers import Event, HandlerRegistry, upsert_if_newer
from reconciler.inbox.receiver import create_app
from reconciler.inbox.store import IncomingEvent, store_items
from reconciler.inbox.worker import Worker
from reconciler.ops.drill import drill_handlers, drill_target, plan
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from tests.conftest import make_settings
from tests.deliveries import stripe_delivery

meta = MetaData()
invoices = Table(
    "d_invoices",
    meta,
    Column("invoice_id", String(64), primary_key=True),
    Column("status", String(32), nullable=False),
    Column("version", Integer, nullable=False),
)
credits = Table(
    "d_credits",
    meta,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("invoice_id", String(64), nullable=False),
    Column("amount", Integer, nullable=False),
)
CHECKS = [
    {
        "object_type": "invoice",
        "table": "d_invoices",
        "key": "invoice_id",
        "fields": {"status": "status"},
    },
    {
        "event_types": ["invoice.paid"],
        "table": "d_credits",
        "key": "invoice_id",
        "unique_by": "invoice_id",
    },
]
STEPS = ("draft", "open", "paid")


def settings_for(db_url: str, business: str, **extra: Any) -> Settings:
    settings = make_settings(db_url, business={"url": business}, **extra)
    stripe = settings.source("stripe")
    assert stripe is not None
    from reconciler.config import CheckSettings

    object.__setattr__(stripe, "checks", tuple(CheckSettings(**c) for c in CHECKS))
    return settings


def seed(engine: Engine, invoices_n: int = 6, source: str = "stripe") -> datetime:
    """Each invoice: created (draft), finalized (open), paid, in that provider order."""
    start = datetime.now(UTC) - timedelta(hours=1)
    items = []
    for i in range(invoices_n):
        for step, status in enumerate(STEPS):
            created = int(start.timestamp()) + i * 10 + step
            event_type = "invoice.paid" if status == "paid" else f"invoice.{status}"
            obj = {"id": f"in_{i}", "object": "invoice", "status": status, "amount_paid": 100 + i}
            _, body = stripe_delivery(f"evt_{i}_{step}", event_type, obj, created=created)
            items.append(IncomingEvent(source, parse_stripe({}, body), body, {}, start))
    with engine.begin() as conn:
        store_items(conn, items)
    return start - timedelta(minutes=1)


def registry(*, idempotent_credit: bool = True, if_newer: bool = True) -> HandlerRegistry:
    def apply(event: Event, conn: Connection) -> None:
        obj = event.payload["data"]["object"]
        with event.business.begin() as biz:
            values = {
                "invoice_id": obj["id"],
                "status": obj["status"],
                "version": event.payload["created"],
            }
            if if_newer:
                upsert_if_newer(biz, invoices, values, key=["invoice_id"], version="version")
            else:  # last write wins: wrong when deliveries come out of order
                if (
                    biz.execute(
                        update(invoices).where(invoices.c.invoice_id == obj["id"]).values(values)
                    ).rowcount
                    == 0
                ):
                    biz.execute(insert(invoices).values(values))
            if event.event_type == "invoice.paid":
                exists = biz.execute(
                    credits.select().where(credits.c.invoice_id == obj["id"])
                ).first()
                if exists is None or not idempotent_credit:
                    biz.execute(
                        insert(credits).values(invoice_id=obj["id"], amount=obj["amount_paid"])
                    )

    r = HandlerRegistry()
    r.register("stripe", "*", apply)
    return r


@pytest.fixture
def business(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'business.db'}"
    engine = make_engine(url)
    meta.create_all(engine)
    engine.dispose()
    return url


def test_plan_delivers_each_event_times_times_shuffled_by_seed() -> None:
    assert plan([1, 2, 3], 2, False, 0) == [1, 1, 2, 2, 3, 3]
    shuffled = plan(list(range(50)), 2, True, 7)
    assert sorted(shuffled) == sorted([*range(50), *range(50)]) and shuffled == plan(
        list(range(50)), 2, True, 7
    )
    assert shuffled != plan(list(range(50)), 2, True, 8)


def test_idempotent_handlers_are_equal_whatever_the_order(
    engine: Engine, db_url: str, business: str
) -> None:
    since = seed(engine)
    settings = settings_for(db_url, business)
    result = drill_handlers(
        engine, settings, registry(), settings.source("stripe"), since=since, times=3, seed=1
    )  # type: ignore[arg-type]
    assert (result.events, result.deliveries, result.equal, result.failed) == (18, 54, True, 0)


def test_a_credit_applied_per_delivery_is_a_duplicate(
    engine: Engine, db_url: str, business: str
) -> None:
    since = seed(engine, 4)
    settings = settings_for(db_url, business)
    result = drill_handlers(
        engine, settings, registry(idempotent_credit=False), settings.source("stripe"), since=since
    )  # type: ignore[arg-type]
    assert sorted((d.kind, d.table, d.key, d.expected, d.actual) for d in result.differences) == [
        ("duplicate", "d_credits", f"in_{i}", 1, 2) for i in range(4)
    ]


def test_outgoing_messages_keyed_by_the_event_are_equal_random_keys_are_extra(
    engine: Engine, db_url: str, business: str
) -> None:
    """The drill also compares what the handlers would send (nothing is sent): a key derived from
    the event is one message however often it runs; a new key on every run is a second message."""
    since = seed(engine, 3)
    settings = settings_for(
        db_url, business, outbox={"targets": [{"name": "crm", "url": "http://127.0.0.1:9/in"}]}
    )
    counter = iter(range(1_000_000))

    def with_messages(random_keys: bool) -> HandlerRegistry:
        base = registry()

        def apply(event: Event, conn: Connection) -> None:
            base.find("stripe", event.event_type)(event, conn)  # type: ignore[misc]
            if event.event_type == "invoice.paid":
                key = f"run-{next(counter)}" if random_keys else None
                event.outbox.add("crm", {"paid": event.payload["data"]["object"]["id"]}, key=key)

        r = HandlerRegistry()
        r.register("stripe", "*", apply)
        return r

    source = settings.source("stripe")
    assert source is not None
    good = drill_handlers(engine, settings, with_messages(False), source, since=since, seed=2)
    assert good.equal, good.differences
    bad = drill_handlers(engine, settings, with_messages(True), source, since=since, seed=2)
    kinds = sorted((d.kind, d.table) for d in bad.differences)
    # every key differs between the two runs: 3 the reference has, 6 the drilled run has
    assert kinds == [("extra", "outbox")] * 6 + [("missing", "outbox")] * 3


def test_last_write_wins_diverges_when_shuffled_not_in_order(
    engine: Engine, db_url: str, business: str
) -> None:
    since = seed(engine, 8)
    settings = settings_for(db_url, business)
    source = settings.source("stripe")
    assert source is not None
    ordered = drill_handlers(
        engine, settings, registry(if_newer=False), source, since=since, shuffle=False
    )
    assert ordered.equal
    shuffled = drill_handlers(
        engine, settings, registry(if_newer=False), source, since=since, seed=3
    )
    kinds = {(d.kind, d.table, d.field) for d in shuffled.differences}
    assert kinds and kinds <= {
        ("diverged", "d_invoices", "status"),
        ("diverged", "d_invoices", "version"),
    }
    assert all(d.expected != d.actual for d in shuffled.differences)


def test_the_drill_never_writes_production(engine: Engine, db_url: str, business: str) -> None:
    since = seed(engine, 2)
    settings = settings_for(db_url, business)
    source = settings.source("stripe")
    assert source is not None
    for url in (business, db_url):
        with pytest.raises(ConfigError, match="production database"):
            drill_handlers(engine, settings, registry(), source, since=since, business_url=url)
    drill_handlers(engine, settings, registry(), source, since=since)
    check = make_engine(business)
    with check.connect() as conn:
        assert conn.execute(invoices.select()).first() is None  # the scratch copy got the rows
    check.dispose()


def _config(tmp_path: Path, db_url: str, business: str, port: int = 8000) -> str:
    checks = "\n".join(
        "[[sources.checks]]\n"
        + "\n".join(
            f"{k} = {json.dumps(v) if not isinstance(v, dict) else '{ ' + ', '.join(f'{a} = {json.dumps(b)}' for a, b in v.items()) + ' }'}"
            for k, v in c.items()
        )
        for c in CHECKS
    )
    path = tmp_path / "drill.toml"
    path.write_text(
        f'[database]\nurl = "{db_url}"\n[receiver]\nport = {port}\n[business]\nurl = "{business}"\n'
        '[worker]\nhandlers = ["tests.handlers_for_drill"]\n'
        '[[sources]]\nname = "billing"\nkind = "stripe"\nsigning_secret_env = "T_STRIPE_SECRET"\n'
        + checks
        + "\n"
    )
    return str(path)


def test_cli_exit_codes_and_json(
    engine: Engine, db_url: str, business: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(engine, 3, source="billing")
    cfg = _config(tmp_path, db_url, business)
    since = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    base = ["drill", "--source", "billing", "--since", since, "--config", cfg]
    assert (
        main([*base, "--handlers", "--json"]) == 1
    )  # tests/handlers_for_drill credits per delivery
    out = json.loads(capsys.readouterr().out)
    assert out["deliveries"] == 18 and out["equal"] is False
    assert {d["kind"] for d in out["differences"]} == {"duplicate"}
    assert len(out["differences"]) == 3
    assert main([*base, "--handlers", "--times", "1"]) == 0
    assert "equal" in capsys.readouterr().out
    for bad, message in (
        (["--handlers", "--business-url", business], "production database"),
        (["--target", "http://127.0.0.1:8000", "--business-url", "sqlite://"], "own receiver"),
        (["--target", "ftp://x", "--business-url", "sqlite://"], "not an http(s) URL"),
        (["--handlers", "--until", "2000-01-01"], "--until: must be after --since"),
        (["--handlers", "--times", "0"], "must be between 1 and 100"),
        (["--target", "http://127.0.0.1:9", "--business-url", "sqlite://"], "cannot be reached"),
    ):
        with pytest.raises(SystemExit) if "--times" in bad else _no_raise():
            code = main([*base, *bad])
            assert code == 2
        assert message in capsys.readouterr().err, bad


class _no_raise:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return False


def test_target_mode_resigns_and_compares_a_staging_receiver(
    engine: Engine, db_url: str, business: str, tmp_path: Path, serve: Any
) -> None:
    """Production's inbox (db_url) holds the events and its business database the state they made
    (applied once); a staging receiver with its own inbox, worker and business database receives
    every event twice, shuffled, signed afresh."""
    since = seed(engine, 3)
    prod_settings = settings_for(db_url, business)
    prod_worker = Worker(engine, prod_settings, registry())
    prod_worker.drain()
    prod_worker.close()

    staging_inbox = f"sqlite:///{tmp_path / 'staging-inbox.db'}"
    staging_business = f"sqlite:///{tmp_path / 'staging-business.db'}"
    s_engine = make_engine(staging_inbox)
    upgrade(s_engine)
    b = make_engine(staging_business)
    meta.create_all(b)
    b.dispose()
    staging = settings_for(staging_inbox, staging_business)
    url = serve(create_app(staging, s_engine)).url
    stop = threading.Event()
    worker = Worker(s_engine, staging, registry())
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        result = drill_target(
            engine,
            prod_settings,
            prod_settings.source("stripe"),  # type: ignore[arg-type]
            target=url,
            business_url=staging_business,
            reference_url=None,
            since=since,
            wait_seconds=20,
        )
    finally:
        stop.set()
        thread.join(timeout=10)
        worker.close()
        s_engine.dispose()
    assert result.deliveries == 18 and result.equal, [d.to_json() for d in result.differences]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    option=st.sampled_from(["--since", "--until", "--times", "--seed", "--wait-seconds"]),
    value=st.text(max_size=30),
)
def test_any_bad_option_value_is_a_clear_error_and_reads_nothing(
    tmp_path: Path, option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hostile option values: exit 2 with an error naming the option, never a traceback."""
    cfg = _config(tmp_path, "sqlite://", "sqlite://", 8000)
    args = ["drill", "--source", "billing", "--since", "2026-01-01", "--handlers", "--config", cfg]
    try:
        code = main([*args, option, value])
    except SystemExit as exc:  # argparse refuses the value itself
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code != 0:
        assert code == 2 and "error" in err, (option, value, err)
