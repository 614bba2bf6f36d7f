"""hookledger prune: only ended events older than the retention go, with their attempts and
deliveries; the dashboard's history keeps their counts; the safe minimum is enforced."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, func, insert, select

from reconciler.errors import ActionRefusedError
from reconciler.ops import overview
from reconciler.ops.prune import prune
from reconciler.ops.timerange import TimeRange, choose_bucket
from reconciler.storage.models import (
    AUDIT_LOG,
    DELIVERIES,
    INBOX_EVENTS,
    PROCESSING_ATTEMPTS,
    QUEUE_SNAPSHOTS,
)
from reconciler.storage.types import utcnow
from tests.conftest import make_settings


def _history(engine: Engine) -> dict[str, Any]:
    now = utcnow()
    old, recent = now - timedelta(days=10), now - timedelta(days=1)
    events = [
        ("old_done", "processed", old),
        ("old_ignored", "ignored", old),
        ("old_dead", "dead", old),
        ("old_pending", "pending", old),
        ("new_done", "processed", recent),
    ]
    with engine.begin() as conn:
        for eid, status, at in events:
            [row] = conn.execute(
                insert(INBOX_EVENTS).returning(INBOX_EVENTS.c.id),
                [
                    {
                        "source": "stripe",
                        "event_id": eid,
                        "body": b"{}",
                        "headers": {},
                        "received_at": at,
                        "origin": "webhook",
                        "status": status,
                        "attempts": 1,
                        "correlation_id": eid,
                    }
                ],
            )
            for outcome in ("accepted", "duplicate"):
                conn.execute(
                    insert(DELIVERIES).values(
                        source="stripe",
                        event_id=eid,
                        received_at=at,
                        outcome=outcome,
                        status_code=200,
                    )
                )
            conn.execute(
                insert(PROCESSING_ATTEMPTS).values(
                    inbox_event_id=row.id,
                    source="stripe",
                    attempt=1,
                    worker="w",
                    started_at=at,
                    finished_at=at,
                    outcome=status if status != "pending" else "failed",
                )
            )
        conn.execute(
            insert(DELIVERIES).values(
                source="stripe", received_at=old, outcome="rejected", status_code=401
            )
        )
        conn.execute(
            insert(QUEUE_SNAPSHOTS),
            [
                {"at": old, "source": "stripe", "unprocessed": 1, "oldest_age_seconds": 1.0},
                {"at": recent, "source": "stripe", "unprocessed": 1, "oldest_age_seconds": 1.0},
            ],
        )
    return {"now": now}


def _left(engine: Engine) -> dict[str, Any]:
    with engine.connect() as conn:
        return {
            "events": sorted(r[0] for r in conn.execute(select(INBOX_EVENTS.c.event_id))),
            "deliveries": conn.execute(select(func.count()).select_from(DELIVERIES)).scalar_one(),
            "attempts": conn.execute(
                select(func.count()).select_from(PROCESSING_ATTEMPTS)
            ).scalar_one(),
            "snapshots": conn.execute(
                select(func.count()).select_from(QUEUE_SNAPSHOTS)
            ).scalar_one(),
        }


def test_prune_deletes_only_ended_events_older_than_the_retention(engine: Engine) -> None:
    now = _history(engine)["now"]
    settings = make_settings()
    month = TimeRange(now - timedelta(days=30), now)
    with engine.connect() as conn:
        before = overview.delivery_counts(conn, month, choose_bucket(month))

    dry = prune(engine, settings, keep=timedelta(days=7), now=now, actor="ops", dry_run=True)
    assert (dry.events, dry.attempts, dry.deliveries, dry.rejected, dry.snapshots) == (
        2,
        2,
        4,
        1,
        1,
    )
    assert len(_left(engine)["events"]) == 5  # a dry run deletes nothing

    done = prune(engine, settings, keep=timedelta(days=7), now=now, actor="ops")
    assert (done.events, done.attempts, done.deliveries, done.rejected, done.snapshots) == (
        2,
        2,
        4,
        1,
        1,
    )
    left = _left(engine)
    assert left["events"] == ["new_done", "old_dead", "old_pending"]
    assert left["deliveries"] == 6 and left["attempts"] == 3 and left["snapshots"] == 1
    with engine.connect() as conn:
        after = overview.delivery_counts(conn, month, choose_bucket(month))
        audit = conn.execute(select(AUDIT_LOG.c.actor, AUDIT_LOG.c.action)).all()
    assert after == before  # the hourly rollup kept the pruned deliveries' counts
    assert [tuple(a) for a in audit] == [("ops", "prune")]
    again = prune(engine, settings, keep=timedelta(days=7), now=now, actor="ops")
    assert again.events == 0


def test_prune_refuses_less_than_the_safe_minimum(engine: Engine) -> None:
    now = _history(engine)["now"]
    with pytest.raises(ActionRefusedError, match="less than 7 days"):
        prune(engine, make_settings(), keep=timedelta(days=3), now=now, actor="ops")
    long_lookback = make_settings(
        sources=[
            {
                "name": "stripe",
                "kind": "stripe",
                "signing_secret_env": "T_STRIPE_SECRET",
                "initial_lookback_hours": 24 * 10,
            }
        ]
    )
    with pytest.raises(ActionRefusedError, match="less than 10 days"):
        prune(engine, long_lookback, keep=timedelta(days=8), now=now, actor="ops")
    forced = prune(engine, make_settings(), keep=timedelta(days=3), now=now, actor="o", force=True)
    assert forced.events == 2


def test_cli_snapshot_and_prune(
    db_url: str, engine: Engine, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from reconciler.cli.main import main
    from reconciler.storage.models import HOURLY_COUNTS

    _history(engine)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[database]\nurl = "{db_url}"\n[[sources]]\nname = "stripe"\nkind = "stripe"\n'
        'signing_secret_env = "T_STRIPE_SECRET"\n'
    )
    assert main(["snapshot", "--config", str(cfg)]) == 0
    assert "recorded 1 queue snapshots" in capsys.readouterr().out
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(HOURLY_COUNTS)).scalar_one() > 0
    assert main(["prune", "--config", str(cfg), "--dry-run"]) == 0
    assert "would delete" in capsys.readouterr().out and len(_left(engine)["events"]) == 5
    assert main(["prune", "--config", str(cfg), "--keep-days", "3"]) == 2
    assert "less than 7 days" in capsys.readouterr().err
    assert main(["prune", "--config", str(cfg), "--actor", "cron"]) == 0
    assert "deleted rows older than" in capsys.readouterr().out
    assert _left(engine)["events"] == ["new_done", "old_dead", "old_pending"]


def test_prune_keeps_an_event_whose_conflict_is_open(engine: Engine) -> None:
    """An operator deciding a conflict needs both versions: the event and the later delivery stay
    until the conflict is kept, applied or ignored."""
    from reconciler.storage.models import DISCREPANCIES

    now = _history(engine)["now"]
    with engine.begin() as conn:
        conn.execute(
            insert(DISCREPANCIES),
            [
                {
                    "source": "stripe",
                    "kind": "conflict",
                    "record_key": "old_done",
                    "field": "data.object.status",
                    "event_id": "old_done",
                    "first_seen_at": now,
                    "last_seen_at": now,
                    "first_run_id": "receiver",
                    "last_run_id": "receiver",
                    "status": "open",
                },
            ],
        )
    done = prune(engine, make_settings(), keep=timedelta(days=7), now=now, actor="ops")
    assert done.events == 1
    assert "old_done" in _left(engine)["events"]
    with engine.begin() as conn:
        conn.execute(DISCREPANCIES.update().values(status="resolved"))
    assert prune(engine, make_settings(), keep=timedelta(days=7), now=now, actor="ops").events == 1
    assert "old_done" not in _left(engine)["events"]


def test_the_scheduler_prunes_nightly_by_the_retention_and_nothing_newer(engine: Engine) -> None:
    """[prune] schedule: the scheduler's job (registered on its cron, in [reconcile] timezone)
    deletes what [retention] keep_days says, audited as the scheduler; "" registers none."""
    from apscheduler.schedulers.background import BackgroundScheduler

    from reconciler.reconcile.run import Reconciler
    from reconciler.schedule import build_scheduler, prune_now

    _history(engine)
    settings = make_settings(retention={"keep_days": 7}, prune={"schedule": "15 4 * * *"})
    sched = build_scheduler(
        engine, settings, Reconciler(engine, settings), scheduler=BackgroundScheduler()
    )
    job = sched.get_job("prune")
    assert job is not None and "hour='4', minute='15'" in str(job.trigger)
    prune_now(engine, settings)
    left = _left(engine)
    assert left["events"] == ["new_done", "old_dead", "old_pending"]  # the newer and unended stay
    with engine.connect() as conn:
        audit = conn.execute(select(AUDIT_LOG.c.actor, AUDIT_LOG.c.action)).all()
    assert [tuple(a) for a in audit] == [("scheduler", "prune")]
    off = make_settings(prune={"schedule": ""})
    quiet = build_scheduler(engine, off, Reconciler(engine, off), scheduler=BackgroundScheduler())
    assert quiet.get_job("prune") is None


def test_a_bad_prune_schedule_is_a_config_error_naming_it() -> None:
    from reconciler.errors import ConfigError

    with pytest.raises(ConfigError, match=r"prune.*schedule.*'every night'"):
        make_settings(prune={"schedule": "every night"})


def test_the_schedulers_health_check_is_its_heartbeat(
    db_url: str, engine: Engine, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    from reconciler.cli.main import main
    from reconciler.schedule import heartbeat

    config = tmp_path / "c.toml"
    config.write_text(f'[database]\nurl = "{db_url}"\n')
    argv = ["schedule", "--check-heartbeat", "180", "--config", str(config)]
    assert main(argv) == 1
    assert "no heartbeat" in capsys.readouterr().err
    heartbeat(engine, f"{socket.gethostname()}:1234", utcnow())
    assert main(argv) == 0
    assert "beat 0 s ago" in capsys.readouterr().out
    heartbeat(engine, "another-host:1", utcnow())  # another host's scheduler is not this one
    with engine.begin() as conn:
        from sqlalchemy import update

        from reconciler.storage.models import SCHEDULER_HEARTBEATS

        conn.execute(
            update(SCHEDULER_HEARTBEATS)
            .where(SCHEDULER_HEARTBEATS.c.owner.like(f"{socket.gethostname()}:%"))
            .values(beat_at=utcnow() - timedelta(minutes=10))
        )
    assert main(argv) == 1
    assert "last heartbeat 600 s ago" in capsys.readouterr().err
