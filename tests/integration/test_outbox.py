"""The transactional outbox on SQLite and PostgreSQL: written with the business change or not at all,
sent by the publisher to a receiver over loopback with its key, retried, dead-lettered, ordered,
taken over after a lease, replayed, reconciled, measured and pruned."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Connection, Engine, delete, func, insert, select, update

from connectors.testing import FakeClock
from reconciler.errors import ActionRefusedError, ConfigError
from reconciler.inbox.handlers import Event, HandlerRegistry
from reconciler.inbox.replay import event_detail, replay_event
from reconciler.inbox.worker import Worker
from reconciler.ops.events import timeline
from reconciler.ops.outbox import load_outbox, targets_now
from reconciler.ops.prune import prune
from reconciler.ops.timerange import TimeRange
from reconciler.outbox import InvalidMessage, add_message
from reconciler.outbox.publisher import Publisher, make_client, publishers
from reconciler.outbox.store import replay_message
from reconciler.outbox.writer import insert_message, message
from reconciler.reconcile.outbox_check import check_outbox
from reconciler.schedule import snapshot
from reconciler.storage.models import (
    AUDIT_LOG,
    DISCREPANCIES,
    OUTBOX,
    OUTBOX_ATTEMPTS,
    OUTBOX_SNAPSHOTS,
)
from tests.business import business_tables, invoices
from tests.conftest import RunningServer, make_settings, start_server
from tests.integration.test_worker import put, row
from tests.standin import StandIn

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def standin() -> Iterator[tuple[StandIn, RunningServer]]:
    receiver = StandIn(secret=SECRET)
    server = start_server(receiver.app)
    yield receiver, server
    server.stop()


def settings_for(db_url: str, url: str, **target: Any) -> Any:
    return make_settings(
        db_url,
        outbox={
            "backoff_base_seconds": 0.01,
            "backoff_max_seconds": 0.02,
            "lease_seconds": 5.0,
            "targets": [
                {
                    "name": "crm",
                    "url": f"{url}/in",
                    "timeout_seconds": 1.0,
                    "signing_secret_env": "T_OUTBOX_SECRET",
                    **target,
                }
            ],
        },
    )


@pytest.fixture(autouse=True)
def _outbox_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_OUTBOX_SECRET", SECRET)


def messages(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return conn.execute(select(OUTBOX).order_by(OUTBOX.c.id)).all()


def attempts(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return conn.execute(select(OUTBOX_ATTEMPTS).order_by(OUTBOX_ATTEMPTS.c.id)).all()


def drain(publisher: Publisher, rounds: int = 50) -> None:
    """Send until nothing is left to send (retries come due after the tiny backoff)."""
    for _ in range(rounds):
        publisher.drain()
        with publisher.engine.connect() as conn:
            left = conn.execute(
                select(func.count())
                .select_from(OUTBOX)
                .where(OUTBOX.c.status.in_(["pending", "failed", "sending"]))
            ).scalar_one()
        if not left:
            return
        time.sleep(0.03)
    raise AssertionError("the outbox did not drain")


# -- writing ------------------------------------------------------------------------------------


def test_a_message_commits_with_the_business_change_or_not_at_all(engine: Engine) -> None:
    with business_tables(engine):
        with engine.begin() as conn:
            conn.execute(
                insert(invoices).values(invoice_id="in_1", status="paid", amount=5, version=1)
            )
            add_message(conn, "crm", {"invoice": "in_1"}, key="in_1-paid")
        with pytest.raises(RuntimeError), engine.begin() as conn:
            conn.execute(
                insert(invoices).values(invoice_id="in_2", status="paid", amount=5, version=1)
            )
            add_message(conn, "crm", {"invoice": "in_2"}, key="in_2-paid")
            raise RuntimeError("the business transaction fails after both writes")
        with engine.begin() as conn:  # the same key again writes nothing, and says so
            add_message(conn, "crm", {"invoice": "in_1", "again": True}, key="in_1-paid")
            again = message("crm", {}, key="in_1-paid")
            assert insert_message(conn, again) is False
            assert insert_message(conn, message("crm", {}, key="in_3-paid")) is True
            conn.execute(delete(OUTBOX).where(OUTBOX.c.key == "in_3-paid"))
        with engine.connect() as conn:
            assert conn.execute(select(invoices.c.invoice_id)).scalars().all() == ["in_1"]
        [m] = messages(engine)
        assert (m.key, m.status, m.payload) == ("in_1-paid", "pending", b'{"invoice":"in_1"}')


def test_a_handlers_message_is_written_once_however_often_its_event_runs(engine: Engine) -> None:
    settings = make_settings(
        engine.url.render_as_string(hide_password=False),
        outbox={"targets": [{"name": "crm", "url": "http://127.0.0.1:9/in"}]},
    )
    registry = HandlerRegistry()
    calls: list[int] = []

    def paid(event: Event, conn: Connection) -> None:
        calls.append(event.attempt)
        key = event.outbox.add("crm", {"invoice": event.event_id})
        assert key == f"stripe:{event.event_id}:crm"
        if event.event_id == "evt_flaky" and event.attempt == 1:
            raise TimeoutError("the step after the message fails: both roll back")

    registry.register("stripe", "*", paid)
    put(engine, "evt_ok")
    put(engine, "evt_flaky")
    worker = Worker(engine, settings, registry)
    worker.drain()
    time.sleep(0.06)
    worker.drain()
    assert [row(engine, e).status for e in ("evt_ok", "evt_flaky")] == ["processed", "processed"]
    with engine.begin() as conn:  # an operator replays a processed event: no second message
        replay_event(conn, source="stripe", event_id="evt_ok", actor="t", reason="check")
    worker.drain()
    assert len(calls) == 4
    assert sorted(m.key for m in messages(engine)) == [
        "stripe:evt_flaky:crm",
        "stripe:evt_ok:crm",
    ]
    m = messages(engine)[0]
    assert (m.source, m.event_id, m.correlation_id) == (
        "stripe",
        m.event_id,
        row(engine, m.event_id).correlation_id,
    )
    assert m.object_key == f"stripe:invoice:{row(engine, m.event_id).object_id}"
    worker.close()


def test_a_handler_gets_a_clear_failure_for_a_bad_message(engine: Engine) -> None:
    settings = make_settings(
        engine.url.render_as_string(hide_password=False),
        outbox={"targets": [{"name": "crm", "url": "http://127.0.0.1:9/in"}]},
    )
    registry = HandlerRegistry()

    def bad(event: Event, conn: Connection) -> None:
        if event.event_id == "evt_unknown_target":
            event.outbox.add("mailer", {"x": 1})
        else:
            event.outbox.add("crm", {"x": 1}, headers={"Idempotency-Key": "mine"})

    registry.register("stripe", "*", bad)
    put(engine, "evt_unknown_target")
    put(engine, "evt_reserved_header")
    worker = Worker(engine, settings, registry)
    worker.drain()
    unknown, reserved = row(engine, "evt_unknown_target"), row(engine, "evt_reserved_header")
    # a target missing from the configuration may be configured and retried; a bad argument not
    assert (unknown.status, unknown.error_class) == ("failed", "transient")
    assert "outbox target 'mailer' is not configured" in unknown.last_error
    assert (reserved.status, reserved.error_class) == ("dead", "permanent")
    assert "header 'Idempotency-Key' is set by the publisher" in reserved.last_error
    assert messages(engine) == []
    worker.close()


# -- publishing ---------------------------------------------------------------------------------


def test_sent_after_a_2xx_with_its_key_correlation_id_and_signature(
    engine: Engine, db_url: str, standin: tuple[StandIn, RunningServer]
) -> None:
    receiver, server = standin
    settings = settings_for(db_url, server.url)
    with engine.begin() as conn:
        key = add_message(
            conn,
            "crm",
            {"order": 7},
            key="order-7",
            headers={"X-Api-Version": "2"},
            correlation_id="corr-7",
        )
    with make_client() as client:
        publisher = Publisher(engine, settings, client)
        assert publisher.drain() == 1
    [m] = messages(engine)
    assert (m.status, m.attempts, m.last_status_code, m.last_error) == ("sent", 1, 202, None)
    assert m.sent_at is not None
    got = receiver.headers[key]
    assert got["idempotency-key"] == "order-7" and got["x-correlation-id"] == "corr-7"
    assert got["x-api-version"] == "2" and got["content-type"] == "application/json"
    assert got["webhook-id"] == "order-7" and receiver.refused == 0  # verified with the secret
    assert receiver.effects == {"order-7": b'{"order":7}'}
    [a] = attempts(engine)
    assert (a.attempt, a.outcome, a.status_code, a.publisher) == (
        1,
        "sent",
        202,
        publisher.publisher_id,
    )


def test_the_signature_verifies_with_the_standard_webhooks_library(
    engine: Engine, db_url: str, standin: tuple[StandIn, RunningServer]
) -> None:
    import standardwebhooks

    receiver, server = standin
    with engine.begin() as conn:
        add_message(conn, "crm", {"a": "é"}, key="k-sig")
    with make_client() as client:
        Publisher(engine, settings_for(db_url, server.url), client).drain()
    h = receiver.headers["k-sig"]
    verified = standardwebhooks.Webhook(SECRET).verify(
        receiver.effects["k-sig"],
        {k: h[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")},
    )
    assert verified == {"a": "é"}


def test_failures_are_classified_retried_with_the_same_key_and_dead_letter(
    engine: Engine, db_url: str, standin: tuple[StandIn, RunningServer]
) -> None:
    receiver, server = standin
    receiver.statuses = {
        "transient": [503, 429, 202],
        "permanent": [422],
        "hopeless": [503, 503, 503],
    }
    receiver.late = {"ambiguous": 1.5}  # applied, answered after the 1 s timeout
    settings = settings_for(db_url, server.url, max_attempts=3)
    with engine.begin() as conn:
        for key in ("transient", "permanent", "hopeless", "ambiguous"):
            add_message(conn, "crm", {"k": key}, key=key)
    with make_client() as client:
        drain(Publisher(engine, settings, client))
    by_key = {m.key: m for m in messages(engine)}
    assert (by_key["transient"].status, by_key["transient"].attempts) == ("sent", 3)
    assert (by_key["ambiguous"].status, by_key["ambiguous"].attempts) == ("sent", 2)
    dead = by_key["permanent"]
    assert (dead.status, dead.attempts, dead.error_class) == ("dead", 1, "permanent")
    assert "answered HTTP 422" in dead.last_error and dead.last_status_code == 422
    hopeless = by_key["hopeless"]
    assert (hopeless.status, hopeless.attempts, hopeless.error_class) == ("dead", 3, "transient")
    # the receiver saw each key as often as it was tried, and applied each once
    assert receiver.arrivals == {"transient": 3, "permanent": 1, "hopeless": 3, "ambiguous": 2}
    assert set(receiver.effects) == {"transient", "ambiguous"}
    classes = [
        (a.attempt, a.outcome, a.error_class)
        for a in attempts(engine)
        if a.message_id == by_key["ambiguous"].id
    ]
    assert classes == [(1, "failed", "ambiguous"), (2, "sent", None)]


def test_retry_after_and_backoff_set_the_next_attempt(
    engine: Engine, db_url: str, standin: tuple[StandIn, RunningServer]
) -> None:
    receiver, server = standin
    receiver.statuses, receiver.retry_after = {"k": [503]}, "120"
    clock = FakeClock(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))
    with engine.begin() as conn:
        add_message(conn, "crm", {}, key="k")
        conn.execute(
            update(OUTBOX).values(next_attempt_at=clock(), created_at=clock(), queued_at=clock())
        )
    settings = settings_for(db_url, server.url)
    with make_client() as client:
        publisher = Publisher(engine, settings, client, clock=clock)
        assert publisher.drain() == 1
    [m] = messages(engine)
    assert m.status == "failed" and m.next_attempt_at == clock() + timedelta(seconds=120)


def test_a_message_to_an_unconfigured_target_waits_and_is_reported(
    engine: Engine, db_url: str, standin: tuple[StandIn, RunningServer]
) -> None:
    _, server = standin
    old = datetime.now(UTC) - timedelta(hours=2)
    with engine.begin() as conn:
        add_message(conn, "gone", {}, key="k-gone")
        conn.execute(update(OUTBOX).values(created_at=old, queued_at=old))
    settings = settings_for(db_url, server.url)
    with make_client() as client:
        assert Publisher(engine, settings, client).drain() == 0
    assert messages(engine)[0].status == "pending"
    summary = check_outbox(
        engine, settings, "outbox:gone", trigger="cli", owner="t", now=datetime.now(UTC)
    )
    assert summary.found == {"outbox_stuck": 1}


def test_per_object_order_holds_a_later_message_back_until_the_earlier_is_sent(
    engine: Engine, db_url: str, standin: tuple[StandIn, RunningServer]
) -> None:
    receiver, server = standin
    receiver.statuses = {"a1": [503, 503, 202], "b1": [422]}
    settings = settings_for(db_url, server.url, order_by_object=True, max_attempts=5)
    with engine.begin() as conn:
        for key, obj in (
            ("a1", "A"),
            ("b1", "B"),
            ("a2", "A"),
            ("b2", "B"),
            ("a3", "A"),
            ("free", None),
        ):
            add_message(conn, "crm", {"k": key}, key=key, object_key=obj)
    with make_client() as client:
        drain(Publisher(engine, settings, client))
    order = receiver.order
    assert order.index("a1") < order.index("a2") < order.index("a3")
    # a dead message does not hold its object back: a person decides about it
    assert {m.key: m.status for m in messages(engine)}["b1"] == "dead" and "b2" in order


def test_a_publisher_that_stops_mid_attempt_loses_its_lease_to_another(
    engine: Engine, db_url: str, standin: tuple[StandIn, RunningServer]
) -> None:
    receiver, server = standin
    settings = settings_for(db_url, server.url, max_attempts=2)
    with engine.begin() as conn:
        add_message(conn, "crm", {"n": 1}, key="k1")
        add_message(conn, "crm", {"n": 2}, key="k2")
    clock = FakeClock(datetime.now(UTC))
    with make_client() as client:
        stalled = Publisher(engine, settings, client, publisher_id="stalled", clock=clock)
        first = stalled.claim()
        assert first is not None and stalled.claim() is not None  # both held, neither answered
        survivor = Publisher(engine, settings, client, publisher_id="survivor", clock=clock)
        assert survivor.drain() == 0  # still leased
        clock.advance(6)
        with engine.begin() as conn:  # k2's lost attempt was its last one
            conn.execute(update(OUTBOX).where(OUTBOX.c.key == "k2").values(attempts=2))
        assert survivor.drain() == 2
        assert stalled.deliver(first) is None  # its lease is gone: it records nothing
    by_key = {m.key: m for m in messages(engine)}
    assert (by_key["k1"].status, by_key["k1"].attempts) == ("sent", 2)
    assert (by_key["k2"].status, by_key["k2"].error_class) == ("dead", "ambiguous")
    assert "the lease expired" in by_key["k2"].last_error
    lost = [
        (a.attempt, a.outcome, a.error_class, a.publisher)
        for a in attempts(engine)
        if a.message_id == by_key["k1"].id
    ]
    assert lost == [(1, "failed", "ambiguous", "(lease expired)"), (2, "sent", None, "survivor")]
    # the stalled publisher woke up and sent too; the key made the two arrivals one effect
    assert receiver.arrivals["k1"] == 2 and list(receiver.effects) == ["k1"]


def test_concurrent_publishers_send_each_message_once(
    engine: Engine, db_url: str, standin: tuple[StandIn, RunningServer]
) -> None:
    receiver, server = standin
    with engine.begin() as conn:
        for i in range(120):
            add_message(conn, "crm", {"i": i}, key=f"k{i}")
    loops = publishers(engine, settings_for(db_url, server.url), 4)  # a client each
    threads = [threading.Thread(target=p.drain) for p in loops]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in loops:
        p.close()
    assert len(receiver.effects) == 120 and set(receiver.arrivals.values()) == {1}
    assert {m.status for m in messages(engine)} == {"sent"}


def test_a_publisher_refuses_to_start_without_its_targets_secret(
    engine: Engine, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("T_OUTBOX_SECRET")
    with pytest.raises(ConfigError, match="T_OUTBOX_SECRET"):
        publishers(engine, settings_for(db_url, "http://127.0.0.1:9"), 1)
    monkeypatch.setenv("T_OUTBOX_SECRET", "not-base64!")
    with pytest.raises(ConfigError, match="not a Standard Webhooks"):
        publishers(engine, settings_for(db_url, "http://127.0.0.1:9"), 1)


# -- operators ----------------------------------------------------------------------------------


def test_reconciliation_reports_stuck_and_dead_then_resolves_after_a_replay(
    engine: Engine, db_url: str, standin: tuple[StandIn, RunningServer]
) -> None:
    receiver, server = standin
    receiver.statuses = {"dead-one": [400]}
    settings = settings_for(db_url, server.url)
    with engine.begin() as conn:
        add_message(conn, "crm", {}, key="dead-one")
        add_message(conn, "crm", {}, key="fresh")
    with make_client() as client:
        publisher = Publisher(engine, settings, client)
        publisher.drain()
        with engine.begin() as conn:  # one more, written two hours ago and never sent
            add_message(conn, "crm", {}, key="old")
            conn.execute(
                update(OUTBOX)
                .where(OUTBOX.c.key == "old")
                .values(
                    created_at=datetime.now(UTC) - timedelta(hours=2),
                    queued_at=datetime.now(UTC) - timedelta(hours=2),
                    next_attempt_at=datetime.now(UTC) + timedelta(days=1),
                )
            )
        now = datetime.now(UTC)
        first = check_outbox(engine, settings, "outbox:crm", trigger="cli", owner="t", now=now)
        assert first.found == {"outbox_stuck": 1, "outbox_dead": 1}
        with engine.connect() as conn:
            rows = conn.execute(
                select(
                    DISCREPANCIES.c.kind,
                    DISCREPANCIES.c.record_key,
                    DISCREPANCIES.c.cause,
                    DISCREPANCIES.c.object_id,
                    DISCREPANCIES.c.local_value,
                )
                .where(DISCREPANCIES.c.source == "outbox:crm")
                .order_by(DISCREPANCIES.c.kind)
            ).all()
        dead_row = next(r for r in rows if r.kind == "outbox_dead")
        assert (dead_row.record_key, dead_row.cause) == ("dead-one", "permanent")
        assert "HTTP 400" in dead_row.local_value
        assert {(r.kind, r.record_key) for r in rows} == {
            ("outbox_dead", "dead-one"),
            ("outbox_stuck", "old"),
        }
        again = check_outbox(engine, settings, "outbox:crm", trigger="cli", owner="t", now=now)
        assert again.resolved == 0  # seen again: still open, one row each
        with engine.begin() as conn:
            replay_message(conn, int(dead_row.object_id), actor="ops", reason="receiver fixed")
            conn.execute(update(OUTBOX).where(OUTBOX.c.key == "old").values(next_attempt_at=now))
        receiver.statuses = {}
        publisher.drain()
        third = check_outbox(
            engine, settings, "outbox:crm", trigger="cli", owner="t", now=datetime.now(UTC)
        )
    assert third.found == {} and third.resolved == 2
    assert receiver.arrivals["dead-one"] == 2 and "dead-one" in receiver.effects
    with engine.connect() as conn:
        audit = conn.execute(
            select(AUDIT_LOG.c.action, AUDIT_LOG.c.actor, AUDIT_LOG.c.reason)
        ).all()
    assert ("outbox.replay", "ops", "receiver fixed") in [tuple(a) for a in audit]


def test_only_dead_or_failed_messages_can_be_replayed(engine: Engine) -> None:
    with engine.begin() as conn:
        add_message(conn, "crm", {}, key="k")
        message_id = conn.execute(select(OUTBOX.c.id)).scalar_one()
    with pytest.raises(ActionRefusedError, match="only dead or failed"), engine.begin() as conn:
        replay_message(conn, message_id, actor="t", reason="r")


def test_the_event_detail_and_timeline_show_the_messages_an_event_caused(engine: Engine) -> None:
    put(engine, "evt_1")
    with engine.begin() as conn:
        add_message(conn, "crm", {}, key="stripe:evt_1:crm")
        conn.execute(
            update(OUTBOX).values(
                source="stripe",
                event_id="evt_1",
                status="sent",
                sent_at=datetime.now(UTC),
                attempts=1,
                last_status_code=202,
            )
        )
    with engine.connect() as conn:
        detail = event_detail(conn, source="stripe", event_id="evt_1")
    assert [m["key"] for m in detail.messages] == ["stripe:evt_1:crm"]
    lines = [t.summary for t in timeline(detail) if t.kind == "outgoing"]
    assert lines == [
        "outbox message #1 to crm written",
        "outbox message #1 sent to crm HTTP 202 (attempt 1)",
    ]


def test_snapshots_read_models_and_metrics_per_target(
    engine: Engine, db_url: str, serve: Any
) -> None:
    from reconciler.inbox.receiver import create_app

    settings = settings_for(db_url, "http://127.0.0.1:9")
    with engine.begin() as conn:
        add_message(conn, "crm", {}, key="a")
        add_message(conn, "crm", {}, key="b")
        conn.execute(update(OUTBOX).where(OUTBOX.c.key == "b").values(status="dead"))
    snapshot(engine, settings)
    with engine.connect() as conn:
        [snap] = conn.execute(select(OUTBOX_SNAPSHOTS)).all()
        [now] = targets_now(conn, ["crm"])
        now_time = datetime.now(UTC)
        view = load_outbox(
            conn,
            TimeRange(now_time - timedelta(hours=1), now_time + timedelta(minutes=1)),
            60,
            now_time,
            ["crm"],
        )
    assert (snap.target, snap.unsent) == ("crm", 1)
    assert (now.unsent, now.by_status) == (1, {"pending": 1, "dead": 1})
    assert [p.unsent for p in view.unsent] == [1]
    text = httpx.get(serve(create_app(settings, engine)).url + "/metrics").text
    assert 'hookledger_outbox_pending{target="crm"} 1.0' in text
    assert 'hookledger_outbox_messages{status="dead",target="crm"} 1.0' in text
    assert 'hookledger_outbox_messages{status="sent",target="crm"} 0.0' in text
    assert 'hookledger_outbox_oldest_pending_age_seconds{target="crm"}' in text


def test_prune_deletes_sent_messages_and_expired_keys_only(engine: Engine, db_url: str) -> None:
    from reconciler.storage.models import IDEMPOTENCY_KEYS

    long_ago = datetime.now(UTC) - timedelta(days=30)
    with engine.begin() as conn:
        for key, status in (("sent-old", "sent"), ("dead-old", "dead"), ("pending-old", "pending")):
            add_message(conn, "crm", {}, key=key)
            conn.execute(
                update(OUTBOX)
                .where(OUTBOX.c.key == key)
                .values(
                    status=status,
                    created_at=long_ago,
                    sent_at=long_ago if status == "sent" else None,
                )
            )
        add_message(conn, "crm", {}, key="sent-new")
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.key == "sent-new")
            .values(status="sent", sent_at=datetime.now(UTC))
        )
        msg = conn.execute(select(OUTBOX.c.id).where(OUTBOX.c.key == "sent-old")).scalar_one()
        conn.execute(
            insert(OUTBOX_ATTEMPTS).values(
                message_id=msg,
                target="crm",
                attempt=1,
                publisher="p",
                started_at=long_ago,
                finished_at=long_ago,
                outcome="sent",
            )
        )
        for key, expires in (("gone", long_ago), ("kept", datetime.now(UTC) + timedelta(days=1))):
            conn.execute(
                insert(IDEMPOTENCY_KEYS).values(
                    owner="o",
                    key=key,
                    fingerprint="f",
                    method="POST",
                    path="/",
                    status="completed",
                    created_at=long_ago,
                    expires_at=expires,
                    response_status=201,
                )
            )
    settings = make_settings(db_url)
    dry = prune(
        engine, settings, keep=timedelta(days=7), now=datetime.now(UTC), actor="t", dry_run=True
    )
    assert (dry.outbox_messages, dry.outbox_attempts, dry.idempotency_keys) == (1, 1, 1)
    done = prune(engine, settings, keep=timedelta(days=7), now=datetime.now(UTC), actor="t")
    assert (done.outbox_messages, done.outbox_attempts, done.idempotency_keys) == (1, 1, 1)
    assert sorted(m.key for m in messages(engine)) == ["dead-old", "pending-old", "sent-new"]
    assert attempts(engine) == []
    with engine.connect() as conn:
        assert conn.execute(select(IDEMPOTENCY_KEYS.c.key)).scalars().all() == ["kept"]


def test_hostile_message_arguments_are_refused_before_anything_is_written(engine: Engine) -> None:
    cases: list[dict[str, Any]] = [
        {"target": "crm", "payload": {"x": float("nan")}, "key": "k"},
        {"target": "crm", "payload": object(), "key": "k"},
        {"target": "crm", "payload": {}, "key": "k\x00"},
        {"target": "crm", "payload": {}, "key": "x" * 256},
        {"target": "c r m", "payload": {}, "key": "k"},
        {"target": "crm", "payload": {}, "key": "k", "headers": {"X-A": "a\r\nInjected: 1"}},
        {"target": "crm", "payload": {}, "key": "k", "correlation_id": "bad id with spaces"},
        {"target": "crm", "payload": b"x" * 2_000_000, "key": "k"},
    ]
    for case in cases:
        with pytest.raises(InvalidMessage), engine.begin() as conn:
            add_message(conn, case.pop("target"), case.pop("payload"), **case)
    assert messages(engine) == []
