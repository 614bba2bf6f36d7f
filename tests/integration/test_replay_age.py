"""A replay (or an operator's retry) makes an event or message due now: its queue age, `stuck`,
the `stuck` discrepancy and ``hookledger_oldest_unprocessed_age_seconds`` count from then, not from
its first receipt (issue 34). On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select, update

from connectors.providers.stripe.signature import parse_stripe
from reconciler.inbox.metrics import oldest_unprocessed
from reconciler.inbox.replay import replay_event
from reconciler.inbox.store import IncomingEvent, store_items
from reconciler.ops.health import health_facts
from reconciler.ops.outbox import targets_now
from reconciler.ops.overview import queue_now
from reconciler.outbox.store import replay_message
from reconciler.outbox.writer import Message, insert_message
from reconciler.reconcile.outbox_check import check_outbox
from reconciler.reconcile.store import open_store
from reconciler.storage.models import DISCREPANCIES, INBOX_EVENTS, OUTBOX
from tests.conftest import make_settings

HOURS_AGO = timedelta(hours=10)
STUCK_AFTER = timedelta(hours=1)


def _receive(engine: Engine, event_id: str, at: datetime) -> None:
    body = json.dumps(
        {"id": event_id, "object": "event", "type": "charge.succeeded", "created": 1}
    ).encode()
    with engine.begin() as conn:
        store_items(conn, [IncomingEvent("stripe", parse_stripe({}, body), body, {}, at)])


def _open_kinds(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        rows = conn.execute(select(DISCREPANCIES.c.kind).where(DISCREPANCIES.c.status == "open"))
        return sorted(str(k) for k in rows.scalars())


def test_a_replayed_event_is_due_now_not_since_its_first_receipt(engine: Engine) -> None:
    now = datetime.now(UTC)
    for event_id in ("evt_a", "evt_b"):
        _receive(engine, event_id, now - HOURS_AGO)
    with engine.begin() as conn:
        conn.execute(update(INBOX_EVENTS).values(status="dead", attempts=8))
        for event_id in ("evt_a", "evt_b"):
            replay_event(conn, source="stripe", event_id=event_id, actor="ops", reason="fixed")

    [(source, count, oldest)] = oldest_unprocessed(engine)  # the /metrics gauge and snapshots
    assert (source, count) == ("stripe", 2)
    assert oldest is not None and now - timedelta(seconds=5) <= oldest <= datetime.now(UTC)
    with engine.connect() as conn:
        facts = health_facts(conn, datetime.now(UTC), [], STUCK_AFTER.total_seconds())
        [queue] = queue_now(conn)
    assert facts.stuck == 0
    assert facts.oldest_unprocessed_age is not None and facts.oldest_unprocessed_age < 60
    assert queue.oldest_age_seconds(datetime.now(UTC)) < 60
    with engine.begin() as conn:
        store = open_store(conn, "stripe", str(uuid.uuid4()), datetime.now(UTC), dry_run=False)
        assert store.passes.stuck_and_dead(STUCK_AFTER) == (0, 0)
    assert _open_kinds(engine) == []
    with engine.connect() as conn:  # the first receipt is kept: orphan windows and the list use it
        received = conn.execute(select(INBOX_EVENTS.c.received_at)).scalars().all()
    assert all(at <= now - HOURS_AGO + timedelta(seconds=1) for at in received)


def test_an_event_waiting_since_its_receipt_is_still_stuck(engine: Engine) -> None:
    """Bounded, not blind: a worker's backoff does not make an event young again."""
    now = datetime.now(UTC)
    _receive(engine, "evt_old", now - HOURS_AGO)
    with engine.begin() as conn:
        conn.execute(update(INBOX_EVENTS).values(status="failed", attempts=3, next_attempt_at=now))
    with engine.connect() as conn:
        facts = health_facts(conn, now, [], STUCK_AFTER.total_seconds())
    assert facts.stuck == 1
    assert facts.oldest_unprocessed_age is not None and facts.oldest_unprocessed_age >= 36_000
    with engine.begin() as conn:
        store = open_store(conn, "stripe", str(uuid.uuid4()), now, dry_run=False)
        assert store.passes.stuck_and_dead(STUCK_AFTER) == (1, 0)


def test_a_replayed_outbox_message_is_due_now(engine: Engine) -> None:
    now = datetime.now(UTC)
    settings = make_settings(
        str(engine.url.render_as_string(hide_password=False)),
        reconcile={"stuck_after_seconds": int(STUCK_AFTER.total_seconds())},
    )
    msg = Message("t", "k1", b"{}", "application/json", {}, "c")
    with engine.begin() as conn:
        assert insert_message(conn, msg, now - HOURS_AGO)
        conn.execute(update(OUTBOX).values(status="dead", attempts=8))
        replay_message(conn, 1, actor="ops", reason="fixed")
    with engine.connect() as conn:
        [target] = targets_now(conn, ["t"])
    age = target.oldest_age_seconds(datetime.now(UTC))
    assert age is not None and age < 60
    summary = check_outbox(
        engine, settings, "outbox:t", trigger="manual", owner="test", now=datetime.now(UTC)
    )
    assert summary.found == {} or not any(summary.found.values()), summary.found
    with engine.connect() as conn:  # when it was written is kept
        assert conn.execute(select(OUTBOX.c.created_at)).scalar_one() <= now - HOURS_AGO
