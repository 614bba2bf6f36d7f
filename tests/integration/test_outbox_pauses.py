"""Issue 46's outbox controls on SQLite and PostgreSQL: a paused target's messages stay pending
until it is resumed (audited, with who and why), "recover since" counts the messages that died
since a time (not those written since), and each target's success rate is sent ÷ attempts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, insert, select, update

from reconciler.errors import ActionRefusedError
from reconciler.ops import outbox as outbox_ops
from reconciler.ops.timerange import TimeRange
from reconciler.outbox import add_message, pauses
from reconciler.outbox.publisher import Publisher, make_client
from reconciler.outbox.store import count_dead_since, recover_since, replay_message
from reconciler.storage.models import AUDIT_LOG, OUTBOX, OUTBOX_ATTEMPTS, OUTBOX_PAUSES
from reconciler.storage.types import utcnow
from tests.conftest import make_settings

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture(autouse=True)
def _outbox_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_OUTBOX_SECRET", SECRET)


def _settings(db_url: str) -> Any:
    target = {"url": "http://receiver.test/in", "signing_secret_env": "T_OUTBOX_SECRET"}
    return make_settings(
        db_url,
        outbox={"targets": [{"name": "crm", **target}, {"name": "mailer", **target}]},
    )


class Receiver:
    """An in-process target (httpx.MockTransport): records each key it was sent, answers
    ``status`` (202 unless a key is listed)."""

    def __init__(self, status: dict[str, int] | None = None) -> None:
        self.keys: list[str] = []
        self.status = status or {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        key = request.headers["Idempotency-Key"]
        self.keys.append(key)
        return httpx.Response(self.status.get(key, 202))


def _statuses(engine: Engine) -> dict[str, str]:
    with engine.connect() as conn:
        return {k: str(s) for k, s in conn.execute(select(OUTBOX.c.key, OUTBOX.c.status))}


def _audit(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                AUDIT_LOG.c.action, AUDIT_LOG.c.actor, AUDIT_LOG.c.target, AUDIT_LOG.c.reason
            ).order_by(AUDIT_LOG.c.id)
        ).all()
    return [tuple(r) for r in rows]


def test_a_paused_target_is_not_sent_until_resumed(engine: Engine, db_url: str) -> None:
    receiver = Receiver()
    with engine.begin() as conn:
        add_message(conn, "crm", {"n": 1}, key="crm-1")
        add_message(conn, "mailer", {"n": 2}, key="mail-1")
    outbox_ops.pause(engine, "crm", actor="ada", reason="CRM maintenance")
    with make_client(httpx.MockTransport(receiver)) as client:
        publisher = Publisher(engine, _settings(db_url), client)
        assert publisher.drain() == 1  # the other target's message only
        assert receiver.keys == ["mail-1"]
        assert _statuses(engine) == {"crm-1": "pending", "mail-1": "sent"}
        with engine.begin() as conn:  # a message written while paused waits too
            add_message(conn, "crm", {"n": 3}, key="crm-2")
        assert publisher.drain() == 0
        with engine.connect() as conn:
            held = pauses.paused(conn)
        assert [(p.target, p.paused_by, p.reason) for p in held.values()] == [
            ("crm", "ada", "CRM maintenance")
        ]
        said = outbox_ops.resume(engine, "crm", actor="bob", reason="CRM back")
        assert said.startswith("outbox target crm resumed (paused by ada at ")
        assert publisher.drain() == 2
    assert receiver.keys == ["mail-1", "crm-1", "crm-2"]
    assert _statuses(engine) == {"crm-1": "sent", "crm-2": "sent", "mail-1": "sent"}
    assert _audit(engine) == [
        ("outbox.pause", "ada", "outbox:crm", "CRM maintenance"),
        ("outbox.resume", "bob", "outbox:crm", "CRM back"),
    ]


def test_pausing_twice_resuming_what_is_not_paused_or_no_reason_are_refused(
    engine: Engine,
) -> None:
    outbox_ops.pause(engine, "crm", actor="ada", reason="maintenance")
    with pytest.raises(ActionRefusedError, match=r"'crm' is already paused \(by ada at .*: maint"):
        outbox_ops.pause(engine, "crm", actor="bob", reason="again")
    with pytest.raises(ActionRefusedError, match="a reason is required"):
        outbox_ops.resume(engine, "crm", actor="bob", reason="  ")
    with pytest.raises(ActionRefusedError, match="'mailer' is not paused"):
        outbox_ops.resume(engine, "mailer", actor="bob", reason="why not")
    with pytest.raises(ActionRefusedError, match="a reason is required"):
        outbox_ops.pause(engine, "mailer", actor="bob", reason="")
    with engine.connect() as conn:
        rows = conn.execute(select(OUTBOX_PAUSES.c.target, OUTBOX_PAUSES.c.paused_by)).all()
    assert [tuple(r) for r in rows] == [("crm", "ada")]  # the first pause's who stays
    assert [a[0] for a in _audit(engine)] == ["outbox.pause"]  # refusals write nothing


def test_recover_since_counts_when_a_message_died_not_when_it_was_written(
    engine: Engine, db_url: str
) -> None:
    """A message written three days ago that the publisher killed just now is recovered from
    "since an hour ago"; one written an hour ago that was dead before then is not (a replay
    and a second death count from the second)."""
    receiver = Receiver({"old-written": 422, "early-death": 422})
    with engine.begin() as conn:
        add_message(conn, "crm", {}, key="early-death")
    with make_client(httpx.MockTransport(receiver)) as client:
        publisher = Publisher(engine, _settings(db_url), client)
        publisher.drain()
        cutoff = utcnow() + timedelta(milliseconds=5)
        with engine.begin() as conn:
            add_message(conn, "crm", {}, key="old-written")
            conn.execute(
                update(OUTBOX)
                .where(OUTBOX.c.key == "old-written")
                .values(created_at=cutoff - timedelta(days=3))
            )
        while utcnow() <= cutoff:
            pass
        publisher.drain()
    with engine.connect() as conn:
        rows = {r.key: r for r in conn.execute(select(OUTBOX))}
        died = dict(
            conn.execute(
                select(OUTBOX.c.key, OUTBOX_ATTEMPTS.c.finished_at).join(
                    OUTBOX_ATTEMPTS, OUTBOX_ATTEMPTS.c.message_id == OUTBOX.c.id
                )
            ).all()
        )
        assert count_dead_since(conn, "crm", cutoff) == 1
        assert count_dead_since(conn, "crm", cutoff - timedelta(days=4)) == 2
        assert count_dead_since(conn, "mailer", cutoff - timedelta(days=4)) == 0
    assert {k: (str(r.status), r.dead_at) for k, r in rows.items()} == {
        k: ("dead", died[k]) for k in ("early-death", "old-written")
    }
    with engine.begin() as conn:
        assert recover_since(conn, "crm", cutoff, actor="ada", reason="r", expected=1) == 1
        replay_message(conn, rows["early-death"].id, actor="ada", reason="r")
    with engine.connect() as conn:
        again = dict(conn.execute(select(OUTBOX.c.key, OUTBOX.c.dead_at)).all())
        assert count_dead_since(conn, "crm", cutoff - timedelta(days=4)) == 0
    assert again == {"early-death": None, "old-written": None}  # pending again: not dead


def test_the_success_rate_is_sent_over_attempts_in_the_range(engine: Engine) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    with engine.begin() as conn:
        add_message(conn, "crm", {}, key="k")
        message_id = conn.execute(select(OUTBOX.c.id)).scalar_one()
        for n, (outcome, ago) in enumerate(
            [("failed", 50), ("failed", 40), ("sent", 30), ("sent", 20), ("dead", 200)]
        ):
            at = now - timedelta(minutes=ago)
            conn.execute(
                insert(OUTBOX_ATTEMPTS).values(
                    message_id=message_id,
                    target="crm" if n < 4 else "mailer",
                    attempt=n + 1,
                    publisher="p",
                    started_at=at,
                    finished_at=at,
                    outcome=outcome,
                )
            )
        hour = TimeRange(now - timedelta(hours=1), now)
        rates = outbox_ops.success_rates(conn, hour, ["crm", "mailer"])
        wider = outbox_ops.success_rates(conn, TimeRange(now - timedelta(hours=4), now), ["mailer"])
        assert outbox_ops.success_rates(conn, hour, []) == {}
    assert {t: (r.sent, r.attempts, r.rate) for t, r in rates.items()} == {"crm": (2, 4, 0.5)}
    assert {t: (r.sent, r.attempts, r.rate) for t, r in wider.items()} == {"mailer": (0, 1, 0.0)}
