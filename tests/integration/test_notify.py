"""Notifications on SQLite and PostgreSQL, sent over loopback to a local HTTP sink (Slack-compatible
and generic webhooks) and a real SMTP server (aiosmtpd): what is told, told once, rate-limited, and
never the run's failure."""

from __future__ import annotations

import json
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select, update
from standardwebhooks import Webhook

from reconciler.config import Settings
from reconciler.notify.dispatch import dispatch
from reconciler.reconcile.run import Reconciler
from reconciler.reconcile.sweep import reconcile_one
from reconciler.schedule import build_scheduler, reconcile_all
from reconciler.storage.models import (
    INBOX_EVENTS,
    NOTIFICATIONS,
    PROCESSING_ATTEMPTS,
    RECON_RUNS,
    SCHEDULER_HEARTBEATS,
)
from tests.conftest import make_settings
from tests.dashboard_data import _event
from tests.notify_sinks import http_sink, smtp_sink
from tests.scenario import Scenario

WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
DASHBOARD = "https://hookledger.example.com"
T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
# dead letters told per source's batch, as the default was before issues (the default tells them
# as issues: test_by_default_dead_letters_are_told_once_per_issue)
PER_BATCH = ["discrepancies", "dead_letters", "run_failed", "run_missed"]


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def with_targets(settings: Settings, *targets: dict[str, Any]) -> Settings:
    data = settings.model_dump(by_alias=True, exclude_unset=True)
    data["notify"] = list(targets)
    data.setdefault("dashboard", {})["public_url"] = DASHBOARD
    return Settings.model_validate(data)


def webhook_target(url: str, **kw: Any) -> dict[str, Any]:
    return {
        "name": "hook",
        "kind": "webhook",
        "url": url,
        "signing_secret_env": "T_NOTIFY_SECRET",
        **kw,
    }


@pytest.fixture(autouse=True)
def _notify_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("T_NOTIFY_SECRET", WEBHOOK_SECRET)


def sent(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(NOTIFICATIONS).order_by(NOTIFICATIONS.c.id)).mappings()
        return [dict(r) for r in rows]


def add_run(
    engine: Engine, run_id: str, status: str, trigger: str, at: datetime, **kw: Any
) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(RECON_RUNS).values(
                run_id=run_id,
                source=kw.get("source", "stripe"),
                trigger=trigger,
                status=status,
                started_at=at - timedelta(seconds=5),
                finished_at=at,
                records_scanned=0,
                counts={},
                error=kw.get("error"),
                detail=kw.get("detail", {}),
            )
        )


def add_dead(
    engine: Engine, source: str, ids: list[str], at: datetime, event_type: str = "invoice.paid"
) -> None:
    with engine.begin() as conn:
        for event_id in ids:
            row = _event(source, event_id, "dead", at, event_type=event_type)
            row.update(correlation_id=event_id, fingerprint=None, processed_at=None)
            pk = conn.execute(
                insert(INBOX_EVENTS).values(**row).returning(INBOX_EVENTS.c.id)
            ).scalar_one()
            conn.execute(
                insert(PROCESSING_ATTEMPTS).values(
                    inbox_event_id=pk,
                    source=source,
                    attempt=1,
                    worker="w",
                    started_at=at,
                    finished_at=at,
                    outcome="dead",
                    error_class="permanent",
                    error="ValueError: no such plan",
                )
            )


def test_a_run_with_new_discrepancies_is_told_once_to_each_kind_of_target(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    with http_sink() as (sink, server), smtp_sink() as (mailbox, smtp_port):
        monkeypatch.setenv("T_SLACK_URL", f"{server.url}/slack")
        settings = with_targets(
            scenario.settings,
            {"name": "ops-slack", "kind": "slack", "url_env": "T_SLACK_URL"},
            webhook_target(f"{server.url}/hook"),
            {
                "name": "ops-mail",
                "kind": "email",
                "smtp_host": "127.0.0.1",
                "smtp_port": smtp_port,
                "smtp_security": "none",
                "from": "hookledger@example.com",
                "to": ["ops@example.com", "finance@example.com"],
            },
        )
        dispatch(scenario.engine, settings)  # the targets are seen before the run
        summary = scenario.reconciler().run("stripe")
        assert summary.status == "succeeded"
        reports = dispatch(scenario.engine, settings)
        assert {name: r.outcomes for name, r in reports.items()} == {
            "ops-slack": {"sent": 1},
            "hook": {"sent": 1},
            "ops-mail": {"sent": 1},
        }
        new = Counter(kind for kind, _, _ in scenario.expected)
        total = sum(new.values())

        [hook] = [(h, b) for p, h, b in sink.received if p == "/hook"]
        headers, body = hook
        payload = Webhook(WEBHOOK_SECRET).verify(body, headers)  # the reference library agrees
        assert payload["type"] == "hookledger.discrepancies"
        assert payload["data"]["run_id"] == summary.run_id
        assert payload["data"]["new"] == dict(new)
        assert payload["data"]["money"] and all(m["currency"] for m in payload["data"]["money"])
        links = payload["data"]["links"]
        assert links["Open discrepancies"] == f"{DASHBOARD}/discrepancies?source=stripe"
        assert links[f"missing ({new['missing']})"] == (
            f"{DASHBOARD}/discrepancies?source=stripe&kind=missing"
        )

        [slack] = sink.bodies("/slack")
        text = json.loads(slack)["text"]
        assert f"stripe: {total} new discrepancies" in text
        assert f"missing {new['missing']}" in text
        assert f"<{DASHBOARD}/discrepancies?source=stripe|Open discrepancies>" in text

        [mail] = mailbox.messages
        assert mail["Subject"] == f"[hookledger] stripe: {total} new discrepancies"
        assert mailbox.envelopes == [
            ("hookledger@example.com", ["ops@example.com", "finance@example.com"])
        ]
        text = mail.get_payload(decode=True).decode()
        assert f"{DASHBOARD}/discrepancies?source=stripe&kind=missing" in text

        # told once: another pass, and a rerun finding the same problems, tell nothing
        dispatch(scenario.engine, settings)
        assert scenario.reconciler().run("stripe").status == "succeeded"
        assert {n: r.outcomes for n, r in dispatch(scenario.engine, settings).items()} == {
            "ops-slack": {},
            "hook": {},
            "ops-mail": {},
        }
        assert len(sink.received) == 2 and len(mailbox.messages) == 1


def test_the_first_run_of_a_fresh_install_and_of_a_new_target_is_told(
    scenario: Scenario,
) -> None:
    """No pass of ``hookledger notify`` before: the scheduler's first run (and the CLI's, which
    shares ``reconcile_one``) records the targets before it runs, so its own findings are told."""
    with http_sink() as (sink, server):
        first = with_targets(scenario.settings, webhook_target(f"{server.url}/hook"))
        [summary] = reconcile_all(Reconciler(scenario.engine, first), first)
        assert summary.status == "succeeded" and summary.found
        [told] = [json.loads(b) for b in sink.bodies("/hook")]
        assert (told["type"], told["data"]["run_id"]) == (
            "hookledger.discrepancies",
            summary.run_id,
        )

        # a target added to the configuration before the next run is told about that run
        # one more discrepancy for the rerun to find: an event at the source the inbox never got
        newest = scenario.world.stripe_events[-1]
        scenario.world.stripe_events.append({**newest, "id": "evt_never_delivered"})
        scenario.sandbox._stripe_cache = None
        later = with_targets(
            scenario.settings,
            webhook_target(f"{server.url}/hook"),
            webhook_target(f"{server.url}/later", name="later"),
        )
        rerun = reconcile_one(Reconciler(scenario.engine, later), "stripe", trigger="cli")
        assert rerun.status == "succeeded" and rerun.found, rerun.to_json()
        dispatch(scenario.engine, later)
        [news] = [json.loads(b) for b in sink.bodies("/later")]
        assert news["data"]["run_id"] == rerun.run_id


def test_a_target_that_cannot_be_told_never_fails_the_run_and_is_retried(
    scenario: Scenario,
) -> None:
    with http_sink([500, 503]) as (sink, server):
        settings = with_targets(scenario.settings, webhook_target(f"{server.url}/hook"))
        dispatch(scenario.engine, settings)
        summaries = reconcile_all(scenario.reconciler(), settings)  # the scheduler's job
        assert [s.status for s in summaries] == ["succeeded"]
        [row] = sent(scenario.engine)
        assert (row["status"], row["attempts"]) == ("pending", 1)
        assert "answered HTTP 500" in row["last_error"]
        later = Clock(datetime.now(UTC) + timedelta(hours=2))  # past any backoff
        dispatch(scenario.engine, settings, clock=later)
        later.at += timedelta(hours=2)
        dispatch(scenario.engine, settings, clock=later)
        later.at += timedelta(hours=2)
        dispatch(scenario.engine, settings, clock=later)
        [row] = sent(scenario.engine)
        assert (row["status"], row["attempts"], row["last_error"]) == ("sent", 3, None)
        ids = {h["webhook-id"] for _, h, _ in sink.received}
        assert len(sink.received) == 3 and len(ids) == 1  # one message, tried three times


def test_dead_letters_are_told_per_source_at_most_every_interval(engine: Engine) -> None:
    with http_sink() as (sink, server):
        target = webhook_target(f"{server.url}/hook", on=PER_BATCH)
        settings = with_targets(make_settings(), target)
        clock = Clock(T0)
        dispatch(engine, settings, clock=clock)
        add_dead(engine, "stripe", ["evt_1", "evt_2", "evt_3"], T0 + timedelta(seconds=10))
        add_dead(engine, "github", ["gh_1"], T0 + timedelta(seconds=20), event_type="push")
        clock.at = T0 + timedelta(minutes=1)
        dispatch(engine, settings, clock=clock)
        told = {p["data"]["source"]: p["data"] for p in map(json.loads, sink.bodies("/hook"))}
        assert {s: (d["new"], d["dead_now"], d["types"]) for s, d in told.items()} == {
            "stripe": (3, 3, {"invoice.paid": 3}),
            "github": (1, 1, {"push": 1}),
        }
        add_dead(engine, "stripe", ["evt_4", "evt_5"], T0 + timedelta(minutes=2))
        clock.at = T0 + timedelta(minutes=3)
        dispatch(engine, settings, clock=clock)
        assert len(sink.received) == 2  # within dead_letters_every_minutes of the last one
        clock.at = T0 + timedelta(minutes=20)
        dispatch(engine, settings, clock=clock)
        dispatch(engine, settings, clock=clock)
        [third] = [json.loads(b) for b in sink.bodies("/hook")[2:]]
        assert (third["data"]["new"], third["data"]["dead_now"]) == (2, 5)
        assert "2 events of stripe became dead letters" in third["data"]["text"]
        # the link names when they were received (exclusive end): it shows these two, not all five
        assert third["data"]["links"]["Open dead letters"] == (
            f"{DASHBOARD}/dead_letters?source=stripe&from=2026-12-02T12%3A02%3A00"
            "&to=2026-12-02T12%3A02%3A01"
        )


def test_a_failed_or_missed_scheduled_run_is_told_and_a_failed_cli_run_is_not(
    engine: Engine,
) -> None:
    with http_sink() as (sink, server):
        settings = with_targets(
            make_settings(reconcile={"schedule": "0 2 * * *", "misfire_grace_seconds": 3600}),
            webhook_target(f"{server.url}/hook"),
        )
        clock = Clock(T0)
        dispatch(engine, settings, scheduled=["stripe"], clock=clock)
        with engine.begin() as conn:
            conn.execute(
                insert(SCHEDULER_HEARTBEATS).values(owner="h:1", started_at=T0, beat_at=T0)
            )
        night = datetime(2026, 12, 3, 2, 0, 5, tzinfo=UTC)
        add_run(engine, "run-cli", "failed", "cli", night, error="HTTP 401 from the API")
        add_run(engine, "run-sched", "failed", "schedule", night, error="sandbox: HTTP 503\nmore")
        clock.at = datetime(2026, 12, 3, 2, 30, tzinfo=UTC)
        dispatch(engine, settings, scheduled=["stripe"], clock=clock)
        [failed] = [json.loads(b) for b in sink.bodies("/hook")]
        assert failed["type"] == "hookledger.run_failed"
        assert (failed["data"]["run_id"], failed["data"]["error"]) == (
            "run-sched",
            "sandbox: HTTP 503",
        )

        # the next night no scheduler ran it: told once its misfire grace is over
        clock.at = datetime(2026, 12, 4, 2, 59, tzinfo=UTC)
        dispatch(engine, settings, scheduled=["stripe"], clock=clock)
        assert len(sink.received) == 1  # still within the grace
        clock.at = datetime(2026, 12, 4, 3, 5, tzinfo=UTC)
        dispatch(engine, settings, scheduled=["stripe"], clock=clock)
        dispatch(engine, settings, scheduled=["stripe"], clock=clock)
        [missed] = [json.loads(b) for b in sink.bodies("/hook")[1:]]
        assert missed["type"] == "hookledger.run_missed"
        assert missed["data"]["slot"] == "2026-12-04T02:00:00+00:00"
        assert missed["data"]["sources"] == ["stripe"]


def test_a_new_install_or_target_is_not_told_past_runs_but_what_is_still_open(
    engine: Engine,
) -> None:
    with http_sink() as (sink, server):
        settings = with_targets(
            make_settings(reconcile={"schedule": "0 2 * * *"}),
            webhook_target(f"{server.url}/hook", on=PER_BATCH),
        )
        add_run(engine, "old", "failed", "schedule", T0 - timedelta(hours=1))
        add_dead(engine, "stripe", ["evt_old"], T0 - timedelta(hours=1))
        dispatch(engine, settings, scheduled=["stripe"], clock=Clock(T0))
        dispatch(engine, settings, scheduled=["stripe"], clock=Clock(T0 + timedelta(days=1)))
        # no heartbeat before last night's slot: nothing was missed; the old run is not told;
        # the dead letter from before the target is still open: told on its first pass, once
        [told] = [json.loads(b) for b in sink.bodies("/hook")]
        assert told["type"] == "hookledger.dead_letters"
        assert (told["data"]["source"], told["data"]["new"], told["data"]["dead_now"]) == (
            "stripe",
            1,
            1,
        )


def test_the_first_notify_pass_of_a_target_added_later_tells_the_open_dead_letters(
    engine: Engine,
) -> None:
    """``hookledger notify`` from cron: a target added to the configuration after dead letters
    appeared is told on its first pass what is still open (not what was replayed since), and
    the target told before is not told again."""
    with http_sink() as (sink, server):
        first = with_targets(make_settings(), webhook_target(f"{server.url}/hook", on=PER_BATCH))
        dispatch(engine, first, clock=Clock(T0))
        add_dead(engine, "stripe", ["evt_1", "evt_2"], T0 + timedelta(minutes=1))
        add_dead(engine, "github", ["gh_fixed"], T0 + timedelta(minutes=1), event_type="push")
        dispatch(engine, first, clock=Clock(T0 + timedelta(minutes=2)))
        assert len(sink.bodies("/hook")) == 2  # told both sources as they appeared
        with engine.begin() as conn:  # gh_fixed replayed and processed since
            conn.execute(
                update(INBOX_EVENTS)
                .where(INBOX_EVENTS.c.event_id == "gh_fixed")
                .values(status="processed")
            )

        later = with_targets(
            make_settings(),
            webhook_target(f"{server.url}/hook", on=PER_BATCH),
            webhook_target(f"{server.url}/later", name="later", on=PER_BATCH),
        )
        reports = dispatch(engine, later, clock=Clock(T0 + timedelta(minutes=30)))
        assert reports["later"].recorded == 1  # not "0 new"
        [told] = [json.loads(b) for b in sink.bodies("/later")]
        assert told["type"] == "hookledger.dead_letters"
        assert {k: told["data"][k] for k in ("source", "new", "dead_now", "types")} == {
            "source": "stripe",
            "new": 2,
            "dead_now": 2,
            "types": {"invoice.paid": 2},
        }
        assert len(sink.bodies("/hook")) == 2  # the first target was told already
        dispatch(engine, later, clock=Clock(T0 + timedelta(hours=2)))
        assert len(sink.bodies("/later")) == 1  # and the new one once


def test_the_rate_limit_holds_back_and_the_next_message_says_how_many(engine: Engine) -> None:
    with http_sink() as (sink, server):
        settings = with_targets(
            make_settings(), webhook_target(f"{server.url}/hook", max_per_hour=2)
        )
        clock = Clock(T0)
        dispatch(engine, settings, clock=clock)
        for i in range(4):
            add_run(engine, f"run-{i}", "failed", "schedule", T0 + timedelta(minutes=1 + i))
        clock.at = T0 + timedelta(minutes=10)
        report = dispatch(engine, settings, clock=clock)["hook"]
        assert report.outcomes == {"sent": 2, "suppressed": 2}
        assert [r["status"] for r in sent(engine)] == ["sent", "sent", "suppressed", "suppressed"]
        add_run(engine, "run-late", "failed", "schedule", T0 + timedelta(minutes=80))
        clock.at = T0 + timedelta(minutes=90)  # the first two are over an hour old
        assert dispatch(engine, settings, clock=clock)["hook"].outcomes == {"sent": 1}
        last = json.loads(sink.bodies("/hook")[-1])
        assert last["data"]["run_id"] == "run-late"
        assert (
            "2 other notifications held back by this target's max_per_hour" in last["data"]["text"]
        )


def test_two_dispatchers_at_once_send_each_notification_once(engine: Engine) -> None:
    with http_sink() as (sink, server):
        settings = with_targets(
            make_settings(), webhook_target(f"{server.url}/hook", max_per_hour=100)
        )
        clock = Clock(T0)
        dispatch(engine, settings, clock=clock)
        for i in range(12):
            add_run(engine, f"run-{i}", "failed", "schedule", T0 + timedelta(seconds=1 + i))
        clock.at = T0 + timedelta(minutes=1)
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def one() -> None:
            try:
                barrier.wait()
                dispatch(engine, settings, clock=clock)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == []
        told = [json.loads(b)["data"]["run_id"] for b in sink.bodies("/hook")]
        assert sorted(told) == sorted(f"run-{i}" for i in range(12))
        assert {r["status"] for r in sent(engine)} == {"sent"}


def test_a_refused_target_gives_up_and_a_slack_url_never_shows(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    with http_sink([404]) as (sink, server):
        monkeypatch.setenv("T_SLACK_URL", f"{server.url}/services/T000/B000/XXXXSECRET")
        settings = with_targets(
            make_settings(), {"name": "ops-slack", "kind": "slack", "url_env": "T_SLACK_URL"}
        )
        clock = Clock(T0)
        dispatch(engine, settings, clock=clock)
        add_run(engine, "run-1", "failed", "schedule", T0 + timedelta(seconds=1))
        clock.at = T0 + timedelta(minutes=1)
        report = dispatch(engine, settings, clock=clock)["ops-slack"]
        assert report.outcomes == {"failed": 1}
        [row] = sent(engine)
        assert row["status"] == "failed" and "XXXXSECRET" not in row["last_error"]
        assert row["last_error"].startswith("the URL in T_SLACK_URL answered HTTP 404")
        clock.at += timedelta(hours=3)
        dispatch(engine, settings, clock=clock)
        assert len(sink.received) == 1  # a 4xx is not retried


def test_the_scheduler_has_a_notification_pass_when_targets_are_configured(engine: Engine) -> None:
    from apscheduler.schedulers.background import BackgroundScheduler

    from reconciler.reconcile.run import Reconciler

    plain = make_settings()
    told = with_targets(plain, webhook_target("http://127.0.0.1:9/hook"))
    for settings, jobs in ((plain, set()), (told, {"notify"})):
        sched = build_scheduler(
            engine, settings, Reconciler(engine, settings), scheduler=BackgroundScheduler()
        )
        assert {j.id for j in sched.get_jobs()} & {"notify"} == jobs


def test_prune_keeps_pending_notifications_and_recent_ones(engine: Engine) -> None:
    from reconciler.ops.prune import prune

    with http_sink([404]) as (_, server):
        settings = with_targets(make_settings(), webhook_target(f"{server.url}/hook"))
        old = T0 - timedelta(days=20)
        dispatch(engine, settings, clock=Clock(old))
        add_run(engine, "run-refused", "failed", "schedule", old + timedelta(seconds=1))
        add_run(engine, "run-sent", "failed", "schedule", old + timedelta(seconds=2))
        dispatch(engine, settings, clock=Clock(old + timedelta(minutes=1)))
        add_run(engine, "run-waiting", "failed", "schedule", T0 - timedelta(days=9))
        with engine.begin() as conn:  # recorded, never sent (no dispatch came to send it)
            from reconciler.notify import store
            from reconciler.notify.detect import facts_for

            facts = facts_for(conn, settings, settings.notify[0], old, T0 - timedelta(days=9), [])
            store.record(conn, "hook", facts, T0 - timedelta(days=9))
        assert [r["status"] for r in sent(engine)] == ["failed", "sent", "pending"]
        dry = prune(engine, settings, keep=timedelta(days=7), now=T0, actor="t", dry_run=True)
        assert dry.notifications == 2
        done = prune(engine, settings, keep=timedelta(days=7), now=T0, actor="t")
        assert done.notifications == 2
        assert [r["status"] for r in sent(engine)] == ["pending"]


def test_the_receiver_exports_notifications_by_target_and_status(
    engine: Engine, serve: Any
) -> None:
    import httpx

    from reconciler.inbox.receiver import create_app

    with http_sink([404]) as (_, server):
        settings = with_targets(
            make_settings(),
            webhook_target(f"{server.url}/hook"),
            {
                "name": "quiet",
                "kind": "webhook",
                "url": f"{server.url}/quiet",
                "on": ["run_missed"],
            },
        )
        clock = Clock(T0)
        dispatch(engine, settings, clock=clock)
        add_run(engine, "run-1", "failed", "schedule", T0 + timedelta(seconds=1))
        add_run(engine, "run-2", "failed", "schedule", T0 + timedelta(seconds=2))
        clock.at = T0 + timedelta(minutes=1)
        dispatch(engine, settings, clock=clock)  # the first is refused (404), the second sent
    url = serve(create_app(settings, engine)).url
    lines = [
        line
        for line in httpx.get(f"{url}/metrics").text.splitlines()
        if line.startswith("hookledger_notifications{")
    ]
    assert sorted(lines) == sorted(
        [
            'hookledger_notifications{status="pending",target="hook"} 0.0',
            'hookledger_notifications{status="sent",target="hook"} 1.0',
            'hookledger_notifications{status="failed",target="hook"} 1.0',
            'hookledger_notifications{status="suppressed",target="hook"} 0.0',
            'hookledger_notifications{status="pending",target="quiet"} 0.0',
            'hookledger_notifications{status="sent",target="quiet"} 0.0',
            'hookledger_notifications{status="failed",target="quiet"} 0.0',
            'hookledger_notifications{status="suppressed",target="quiet"} 0.0',
        ]
    )
