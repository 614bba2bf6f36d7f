"""Silencing a health warning (SQLite and PostgreSQL): who, why and until when, audited in the
same transaction; expired silences are history; a silence is refused without a reason or for
longer than 30 days."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine, select

from reconciler.errors import ActionRefusedError
from reconciler.ops import health
from reconciler.ops.silences import active, silence, unsilence
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import AUDIT_LOG, HEALTH_SILENCES
from reconciler.storage.types import utcnow


@pytest.fixture
def db(engine: Engine) -> Engine:
    upgrade(engine)
    return engine


def test_a_silenced_warning_says_who_and_until_when_and_is_audited(db: Engine) -> None:
    now = utcnow()
    message = silence(db, "Scheduler", timedelta(days=1), now, actor="ada", reason="demo box")
    assert message.startswith("'Scheduler' silenced until ")
    with db.connect() as conn:
        facts = health.health_facts(conn, now, ("stripe",), 3600)
        audit = conn.execute(
            select(AUDIT_LOG.c.actor, AUDIT_LOG.c.action, AUDIT_LOG.c.target, AUDIT_LOG.c.reason)
        ).all()
    assert [tuple(a) for a in audit] == [("ada", "health.silenced", "Scheduler", "demo box")]
    signals = {s.label: s for s in health.judge(facts, 3600, 60)}
    scheduler = signals["Scheduler"]  # never seen: a warning
    assert scheduler.level is health.Level.WARN
    assert scheduler.silenced is not None and scheduler.silenced.startswith("silenced by ada until")
    assert scheduler.silenced.endswith("UTC: demo box")
    # past its end it is history: the warning shows again
    with db.connect() as conn:
        assert active(conn, now + timedelta(days=1, seconds=1)) == {}


def test_a_red_signal_is_never_silenced(db: Engine) -> None:
    now = utcnow()
    silence(db, "Dead events", timedelta(hours=1), now, actor="ada", reason="noise")
    with db.connect() as conn:
        facts = health.health_facts(conn, now, ("stripe",), 3600)
    facts = health.HealthFacts(**{**facts.__dict__, "dead": 3})
    dead = next(s for s in health.judge(facts, 3600, 60) if s.label == "Dead events")
    assert dead.level is health.Level.BAD and dead.silenced is None


def test_showing_it_again_ends_the_silence_and_is_audited(db: Engine) -> None:
    now = utcnow()
    silence(db, "Last delivery", timedelta(days=7), now, actor="ada", reason="holiday")
    assert unsilence(db, "Last delivery", now, actor="bob", reason="back") == (
        "'Last delivery' shows again"
    )
    with db.connect() as conn:
        assert active(conn, now + timedelta(seconds=1)) == {}
        actions = conn.execute(select(AUDIT_LOG.c.action).order_by(AUDIT_LOG.c.id)).scalars().all()
    assert actions == ["health.silenced", "health.unsilenced"]
    with pytest.raises(ActionRefusedError, match="is not silenced"):
        unsilence(db, "Last delivery", now, actor="bob", reason="again")


@pytest.mark.parametrize(
    ("length", "reason", "error"),
    [
        (timedelta(hours=1), "  ", "a reason is required"),
        (timedelta(days=31), "long", "between a minute and 30 days"),
        (timedelta(0), "none", "between a minute and 30 days"),
    ],
)
def test_a_silence_is_refused_and_nothing_is_written(
    db: Engine, length: timedelta, reason: str, error: str
) -> None:
    with pytest.raises(ActionRefusedError, match=error):
        silence(db, "Scheduler", length, utcnow(), actor="ada", reason=reason)
    with db.connect() as conn:
        assert conn.execute(select(HEALTH_SILENCES.c.id)).all() == []
        assert conn.execute(select(AUDIT_LOG.c.id)).all() == []
