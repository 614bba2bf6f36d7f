"""The applied mark and the lease fence, in process, on SQLite and PostgreSQL, with the business
tables in the inbox's database or in a separate one (issue 44; the kill -9 tests with real worker
processes are in test_applied_once.py)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, func, select, update

from reconciler.inbox.abandon import abandon, release_owner
from reconciler.inbox.applied import Mark, insert_mark
from reconciler.inbox.handlers import Event, HandlerRegistry
from reconciler.inbox.replay import replay_event
from reconciler.inbox.worker import Worker
from reconciler.ops.dead_letters import DeadFilter, replay_matching
from reconciler.storage.models import APPLIED, INBOX_EVENTS
from reconciler.storage.models import PROCESSING_ATTEMPTS as A
from tests.balances import balances
from tests.conftest import make_settings
from tests.integration.test_worker import put, row


def _worker(engine: Engine, db_url: str, business_url: str | None, fn: Any) -> Worker:
    registry = HandlerRegistry()
    registry.register("stripe", "*", fn)
    extra: dict[str, Any] = {"business": {"url": business_url}} if business_url else {}
    return Worker(engine, make_settings(db_url, **extra), registry, worker_id="w-a")


def _add(event: Event, _conn: Connection) -> None:
    with event.business.begin() as biz:
        current = biz.execute(
            select(balances.c.amount).where(balances.c.account == event.event_id)
        ).scalar()
        if current is None:
            biz.execute(balances.insert().values(account=event.event_id, amount=100))
        else:
            biz.execute(
                update(balances)
                .where(balances.c.account == event.event_id)
                .values(amount=current + 100)
            )


def _balances(business: Engine) -> dict[str, int]:
    with business.connect() as conn:
        return {r.account: r.amount for r in conn.execute(select(balances))}


def _marks(business: Engine) -> list[tuple[str, int]]:
    with business.connect() as conn:
        rows = conn.execute(select(APPLIED.c.event_id, APPLIED.c.replay).order_by(APPLIED.c.replay))
        return [(r.event_id, r.replay) for r in rows]


def test_a_worker_that_lost_its_lease_commits_nothing(
    engine: Engine, db_url: str, business_url: str | None, business: Engine
) -> None:
    put(engine, "evt_lost")

    def taken_over_then_writes(event: Event, conn: Connection) -> None:
        with engine.begin() as other:  # another worker claims the event meanwhile
            other.execute(
                update(INBOX_EVENTS)
                .where(INBOX_EVENTS.c.id == event.id)
                .values(lease_owner="w-b", lease_expires_at=datetime.now(UTC) + timedelta(60))
            )
        _add(event, conn)

    worker = _worker(engine, db_url, business_url, taken_over_then_writes)
    try:
        [event] = worker.claim()
        assert worker.process(event) is None  # the lease was lost
    finally:
        worker.close()
    assert _balances(business) == {}  # the fence rolled the business writes back
    assert _marks(business) == []
    assert row(engine, "evt_lost").lease_owner == "w-b"


def test_a_replay_applies_again_a_retry_does_not(
    engine: Engine, db_url: str, business_url: str | None, business: Engine
) -> None:
    put(engine, "evt_r")
    worker = _worker(engine, db_url, business_url, _add)
    try:
        worker.drain()
        assert _balances(business) == {"evt_r": 100} and _marks(business) == [("evt_r", 0)]
        with engine.begin() as conn:  # the operator asks for it again: a new round
            replay_event(conn, source="stripe", event_id="evt_r", actor="t")
        worker.drain()
        assert _balances(business) == {"evt_r": 200}
        assert _marks(business) == [("evt_r", 0), ("evt_r", 1)]

        # A dead event whose business writes an attempt committed (its worker died before the
        # inbox's commit, then the event hung): replaying it stays in its round.
        put(engine, "evt_d")
        with business.begin() as conn:
            conn.execute(balances.insert().values(account="evt_d", amount=100))
            insert_mark(conn, Mark("stripe", "evt_d", 0, 1, "w-old"), datetime.now(UTC))
        with engine.begin() as conn:
            conn.execute(
                update(INBOX_EVENTS)
                .where(INBOX_EVENTS.c.event_id == "evt_d")
                .values(status="dead", error_class="hung")
            )
        replay_matching(engine, DeadFilter(sources=("stripe",)), actor="t", reason="fixed")
        worker.drain()
    finally:
        worker.close()
    assert _balances(business)["evt_d"] == 100  # not credited twice
    done = row(engine, "evt_d")
    assert done.status == "processed"
    assert "applied by an earlier attempt" in _last_attempt_note(engine, done.id)


def _last_attempt_note(engine: Engine, inbox_id: int) -> str:
    with engine.connect() as conn:
        return str(
            conn.execute(
                select(A.c.error).where(A.c.inbox_event_id == inbox_id).order_by(A.c.id.desc())
            ).scalar()
        )


def test_abandoned_attempts_count_hangs_until_dead_as_hung(engine: Engine, db_url: str) -> None:
    for event_id in ("evt_hung", "evt_next"):
        put(engine, event_id)
    cfg = make_settings(db_url, worker={"max_hangs": 2}).worker
    now = datetime.now(UTC)

    def lease(owner: str) -> int:
        with engine.begin() as conn:
            conn.execute(
                update(INBOX_EVENTS).values(
                    status="processing", lease_owner=owner, attempts=INBOX_EVENTS.c.attempts + 1
                )
            )
            return int(
                conn.execute(
                    select(INBOX_EVENTS.c.id).where(INBOX_EVENTS.c.event_id == "evt_hung")
                ).scalar_one()
            )

    outcomes = []
    for owner in ("w-1", "w-2"):
        event = lease(owner)
        with engine.begin() as conn:
            assert (
                abandon(
                    conn,
                    event,
                    "someone-else",
                    reason="x",
                    started_at=now,
                    now=now,
                    cfg=cfg,
                    rng=random.Random(0),
                )
                is None
            )  # not theirs: nothing
            done = abandon(
                conn,
                event,
                owner,
                reason="handler_timeout: too long",
                started_at=now,
                now=now,
                cfg=cfg,
                rng=random.Random(0),
            )
            assert done is not None
            outcomes.append((done.status.value, done.hangs))
            assert release_owner(conn, owner, now) == 1  # evt_next given back
    assert outcomes == [("failed", 1), ("dead", 2)]
    with engine.connect() as conn:
        recorded = conn.execute(select(A.c.attempt, A.c.worker, A.c.outcome).order_by(A.c.id)).all()
    # each attempt that never came back has its row: interrupted, then the one that made it dead
    assert [tuple(r) for r in recorded] == [(1, "w-1", "interrupted"), (2, "w-2", "dead")]
    hung = row(engine, "evt_hung")
    assert hung.error_class == "hung" and "max_hangs = 2" in hung.last_error
    assert row(engine, "evt_next").status == "pending" and row(engine, "evt_next").hangs == 0
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(APPLIED)).scalar_one() == 0
