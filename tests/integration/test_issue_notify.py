"""Notifications per issue, on SQLite and PostgreSQL: a target with ``on = ["issues"]`` is told
once per new issue and once more each time one reopens, never per failure; the scheduler groups
failures into issues every minute and right after its runs."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import Engine, insert

from reconciler.issues import actions
from reconciler.notify.dispatch import dispatch
from reconciler.schedule import build_scheduler, refresh_issues
from reconciler.storage.models import DISCREPANCIES
from reconciler.storage.types import utcnow
from tests.conftest import make_settings
from tests.integration.test_issues import dead_event, issues
from tests.integration.test_notify import (
    DASHBOARD,
    WEBHOOK_SECRET,
    Clock,
    webhook_target,
    with_targets,
)
from tests.notify_sinks import http_sink


@pytest.fixture(autouse=True)
def _notify_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_NOTIFY_SECRET", WEBHOOK_SECRET)


def test_one_notice_per_new_or_reopened_issue_not_per_failure(engine: Engine) -> None:
    start = utcnow()
    clock = Clock(start)
    with http_sink() as (sink, server):
        settings = with_targets(
            make_settings(), webhook_target(f"{server.url}/hook", on=["issues"])
        )
        dispatch(engine, settings, clock=clock)  # the target is seen: told what comes after
        for k in range(3):
            dead_event(engine, start + timedelta(seconds=10 + k), f"unknown plan 'p{k}'")
        dead_event(engine, start + timedelta(seconds=20), "ledger timeout", source="github")
        clock.at = start + timedelta(minutes=1)
        dispatch(engine, settings, clock=clock)
        told = [json.loads(b) for b in sink.bodies("/hook")]
        assert sorted((t["data"]["source"], t["data"]["count"]) for t in told) == [
            ("github", 1),
            ("stripe", 3),
        ]
        stripe = next(t["data"] for t in told if t["data"]["source"] == "stripe")
        assert stripe["signature"] == "unknown plan <str>" and "'p0'" not in json.dumps(stripe)
        assert stripe["title"] == f"stripe: new issue #{stripe['issue']}"
        assert stripe["links"]["Open the issue"] == f"{DASHBOARD}/issues?id={stripe['issue']}"
        assert {t["type"] for t in told} == {"hookledger.issue"}

        dead_event(engine, start + timedelta(minutes=2), "unknown plan 'p9'")  # same issue
        clock.at = start + timedelta(minutes=3)
        dispatch(engine, settings, clock=clock)
        assert len(sink.received) == 2  # a further failure of a told issue is not told

        actions.resolve(engine, stripe["issue"], actor="ana")
        dead_event(engine, utcnow() + timedelta(minutes=4), "unknown plan 'p10'")
        clock.at = utcnow() + timedelta(minutes=5)
        dispatch(engine, settings, clock=clock)
        (again,) = [json.loads(b)["data"] for b in sink.bodies("/hook")[2:]]
        assert (again["issue"], again["reopened"], again["count"]) == (stripe["issue"], 1, 5)
        assert again["title"] == f"stripe: issue reopened #{stripe['issue']}"


def test_by_default_dead_letters_are_told_once_per_issue(engine: Engine) -> None:
    """A target that names nothing is told of issues, not of each batch of dead letters; an issue
    of a kind it already hears of in its own notice (a discrepancy: ``discrepancies``; a failed
    run: ``run_failed``) is not told twice. A target with only ``issues`` hears every kind."""
    start = utcnow()
    clock = Clock(start)
    with http_sink() as (sink, server):
        settings = with_targets(
            make_settings(),
            webhook_target(f"{server.url}/hook"),
            webhook_target(f"{server.url}/all", name="all", on=["issues"]),
        )
        dispatch(engine, settings, clock=clock)
        for k in range(3):
            dead_event(engine, start + timedelta(seconds=10 + k), f"unknown plan 'p{k}'")
        with engine.begin() as conn:
            conn.execute(
                insert(DISCREPANCIES).values(
                    source="stripe",
                    kind="missing",
                    record_key="evt_lost",
                    field="",
                    cause="webhook_lost",
                    first_seen_at=start + timedelta(seconds=20),
                    last_seen_at=start + timedelta(seconds=20),
                    first_run_id="r",
                    last_run_id="r",
                    status="open",
                )
            )
        clock.at = start + timedelta(minutes=1)
        dispatch(engine, settings, clock=clock)
        told = [json.loads(b) for b in sink.bodies("/hook")]
        assert [(t["type"], t["data"]["kind"], t["data"]["count"]) for t in told] == [
            ("hookledger.issue", "dead_event", 3)
        ]
        everything = sorted(json.loads(b)["data"]["kind"] for b in sink.bodies("/all"))
        assert everything == ["dead_event", "discrepancy"]


def test_the_scheduler_groups_failures_every_minute_and_never_fails_for_it(engine: Engine) -> None:
    from apscheduler.schedulers.background import BackgroundScheduler

    from reconciler.reconcile.run import Reconciler

    settings = make_settings()
    sched = build_scheduler(
        engine, settings, Reconciler(engine, settings), scheduler=BackgroundScheduler()
    )
    assert "issues" in {j.id for j in sched.get_jobs()}
    dead_event(engine, utcnow(), "boom 7")
    refresh_issues(engine, settings)
    assert [i.count for i in issues(engine)] == [1]
    engine.dispose()
    from reconciler.storage.engine import make_engine

    gone = make_engine("sqlite:////nonexistent-dir/hookledger.db")
    refresh_issues(gone, settings)  # logged, not raised: a pass must not fail the scheduler
