"""``hookledger reconcile``, ``export``, ``backfill`` and ``schedule`` as an operator runs them (the
executable in a subprocess, or its main() in process), over the shared scenario (tests/scenario.py)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import (
    Engine,
    insert,
    select,
)

from connectors.sandbox.app import Faults, Sandbox
from connectors.sandbox.world import build_world
from reconciler.storage.models import DISCREPANCIES, RECON_RUNS
from tests.conftest import start_server
from tests.scenario import (
    Scenario,
    write_config,
)


def test_the_hookledger_executable_freezes_its_start_up_heap_before_it_scans(
    scenario: Scenario, db_url: str, tmp_path: Any
) -> None:
    """A fresh ``hookledger reconcile`` process moves its start-up objects (~80k: modules, classes)
    out of the full collections' reach before it scans (``reconciler/process.py``)."""
    cfg = write_config(tmp_path / "c.toml", scenario, db_url)
    script = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count(), file=sys.stderr))\n"
        "from reconciler.cli.main import run\n"
        f"sys.argv = ['hookledger', 'reconcile', '--json', '--config', {cfg!r}]\n"
        "run()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"][0]["status"] == "succeeded"
    frozen = int(done.stderr.rsplit("frozen ", 1)[1].split()[0])
    assert frozen > 50_000, done.stderr


def test_cli_reconcile_exit_codes_json_and_bulk_actions(
    scenario: Scenario,
    db_url: str,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from reconciler.cli.main import main

    cfg = write_config(tmp_path / "c.toml", scenario, db_url)
    assert main(["reconcile", "--config", cfg, "--json", "--fail-on-discrepancy"]) == 1
    out = json.loads(capsys.readouterr().out)
    [run] = out["runs"]
    # money impact of the missing invoice events, independently from the ground truth
    truth: dict[tuple[str, str], set[str]] = {}
    for e in scenario.world.stripe_events:
        if e["id"] in scenario.dropped and e["data"]["object"]["object"] == "invoice":
            obj = e["data"]["object"]
            truth.setdefault((obj["currency"], e["id"]), set()).add(str(obj["amount_due"]))
    expected_missing: dict[str, int] = {}
    for (currency, _), amounts in truth.items():
        expected_missing[currency] = expected_missing.get(currency, 0) + int(next(iter(amounts)))
    got = {r["currency"]: r["amount"] for r in out["money_impact"] if r["kind"] == "missing"}
    assert got == expected_missing
    assert run["status"] == "succeeded" and run["records_scanned"] == 150
    assert sum(run["open"].values()) == len(scenario.expected)
    # the text form: the run's line with the dashboard link to what is open, then the open money
    # impact under a line that says what it is
    assert main(["reconcile", "--config", cfg]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("stripe: succeeded, 0 records scanned")  # nothing new since
    assert lines[1].startswith("  seen by this run: http://127.0.0.1:8501/discrepancies?run=")
    assert lines[2] == "  open: http://127.0.0.1:8501/discrepancies?source=stripe"
    assert lines[3] == "open money impact (missing / diverged / unapplied, all runs):"
    assert {line.split(" records, ")[0] for line in lines[3:]} >= {
        f"  stripe: missing {sum(1 for c, _ in truth if c == currency)}"
        for currency in expected_missing
    }

    assert (
        main(
            [
                "discrepancies",
                "ignore",
                "--kind",
                "orphaned",
                "--reason",
                "test mode events",
                "--config",
                cfg,
            ]
        )
        == 2
    )
    assert "2 discrepancies match; add --yes" in capsys.readouterr().err
    assert (
        main(
            [
                "discrepancies",
                "ignore",
                "--kind",
                "orphaned",
                "--reason",
                "test mode events",
                "--yes",
                "--config",
                cfg,
            ]
        )
        == 0
    )
    with scenario.engine.connect() as conn:
        one = (
            conn.execute(select(DISCREPANCIES.c.id).where(DISCREPANCIES.c.kind == "stuck"))
            .scalars()
            .first()
        )
    assert (
        main(
            [
                "discrepancies",
                "resolve",
                str(one),
                "--reason",
                "requeued by hand",
                "--actor",
                "ops",
                "--config",
                cfg,
            ]
        )
        == 0
    )
    assert main(["discrepancies", "resolve", "999999", "--reason", "x", "--config", cfg]) == 2
    assert (
        main(
            [
                "discrepancies",
                "resolve",
                "--status",
                "open",
                "--reason",
                "accepted risk",
                "--yes",
                "--config",
                cfg,
            ]
        )
        == 0
    )
    capsys.readouterr()
    # marked resolved, but the two events are still stuck: the next run reopens them
    assert main(["reconcile", "--config", cfg, "--json", "--fail-on-discrepancy"]) == 1
    assert json.loads(capsys.readouterr().out)["runs"][0]["open"] == {"stuck": 2}
    assert (
        main(
            [
                "discrepancies",
                "ignore",
                "--kind",
                "stuck",
                "--reason",
                "known, being fixed",
                "--yes",
                "--config",
                cfg,
            ]
        )
        == 0
    )
    assert (
        main(["reconcile", "--config", cfg, "--fail-on-discrepancy"]) == 0
    )  # ignored stays ignored
    # called in-process, the CLI leaves the caller's garbage collector alone
    assert gc.get_freeze_count() == 0
    from reconciler.storage.models import AUDIT_LOG

    with scenario.engine.connect() as conn:
        actions = [
            str(a)
            for a in conn.execute(select(AUDIT_LOG.c.action).order_by(AUDIT_LOG.c.id)).scalars()
        ]
    assert actions == [
        "discrepancy.ignored.bulk",
        "discrepancy.resolved",
        "discrepancy.resolved.bulk",
        "discrepancy.ignored.bulk",
    ]

    monkeypatch.setenv("T_SBX_KEY", "sk_test_wrong")
    assert main(["reconcile", "--config", cfg]) == 2
    assert "HTTP 401" in capsys.readouterr().err


def test_export_csv_columns_quoting_and_formula_injection(
    scenario: Scenario, db_url: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import csv
    import io

    from reconciler.cli.main import main
    from reconciler.reconcile.export import COLUMNS

    scenario.reconciler().run("stripe")
    now = datetime.now(UTC)
    tricky = [
        ('=HYPERLINK("http://evil")', 'a,b "quoted"\nsecond line'),
        ("+1+1", "-2"),
        ("@SUM(A1)", "\tTAB"),
        ("\rCR", "plain"),
    ]
    with scenario.engine.begin() as conn:
        for i, (src, local) in enumerate(tricky):
            conn.execute(
                insert(DISCREPANCIES).values(
                    source="stripe",
                    kind="diverged",
                    record_key=f"t_invoices:x{i}",
                    field="status",
                    object_id=f"x{i}",
                    source_value=src,
                    local_value=local,
                    first_seen_at=now,
                    last_seen_at=now,
                    first_run_id="r",
                    last_run_id="r",
                    status="open",
                    detail={"note": "=cmd"},
                )
            )
    cfg = write_config(tmp_path / "c.toml", scenario, db_url)
    assert main(["export", "--config", cfg, "--status", "all", "-o", "-"]) == 0
    text = capsys.readouterr().out
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert tuple(rows[0]) == COLUMNS
    assert len(rows) - 1 == len(scenario.expected) + len(tricky)
    by_key = {r[COLUMNS.index("object_id")]: r for r in rows[1:]}
    sv, lv = COLUMNS.index("source_value"), COLUMNS.index("local_value")
    assert (
        by_key["x0"][sv] == '\'=HYPERLINK("http://evil")'
        and by_key["x0"][lv] == 'a,b "quoted"\nsecond line'
    )
    assert (by_key["x1"][sv], by_key["x1"][lv]) == ("'+1+1", "'-2")
    assert (by_key["x2"][sv], by_key["x2"][lv]) == ("'@SUM(A1)", "'\tTAB")
    assert by_key["x3"][sv] == "'\rCR"
    assert "\r\n" in text  # RFC 4180 line ends
    missing = next(r for r in rows[1:] if r[COLUMNS.index("kind")] == "missing")
    assert (
        missing[COLUMNS.index("first_seen_at")].endswith("Z")
        and missing[COLUMNS.index("cause")] == "not_received"
    )
    out_file = tmp_path / "reports" / "missing.csv"
    out_file.parent.mkdir()  # (a folder that does not exist is refused: issue 34)
    assert main(["export", "--config", cfg, "--kind", "missing", "-o", str(out_file)]) == 0
    with out_file.open(newline="", encoding="utf-8") as fh:
        assert len(list(csv.reader(fh))) == 1 + len(scenario.dropped)
    assert not [p for p in out_file.parent.iterdir() if p.name.endswith(".tmp")]


def test_cli_backfill(
    scenario: Scenario, db_url: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from reconciler.cli.main import main

    cfg = write_config(tmp_path / "c.toml", scenario, db_url)
    assert (
        main(
            [
                "backfill",
                scenario.dropped[0],
                "--source",
                "stripe",
                "--reason",
                "found missing",
                "--config",
                cfg,
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.strip().endswith("accepted")
    assert main(["backfill", scenario.dropped[0], "--source", "stripe", "--config", cfg]) == 0
    assert capsys.readouterr().out.strip().endswith("duplicate")
    assert main(["backfill", "evt_nope", "--source", "stripe", "--config", cfg]) == 2


def test_scheduler_runs_now_and_snapshots(
    scenario: Scenario, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import time

    from apscheduler.schedulers.background import BackgroundScheduler

    from reconciler.schedule import build_scheduler, trigger_for
    from reconciler.storage.models import QUEUE_SNAPSHOTS

    settings = scenario.settings.model_copy(
        update={
            "reconcile": scenario.settings.reconcile.model_copy(
                update={"snapshot_interval_seconds": 5}
            )
        }
    )
    sched = build_scheduler(
        scenario.engine,
        settings,
        scenario.reconciler(),
        run_now=True,
        scheduler=BackgroundScheduler(),
    )
    reconcile_job = sched.get_job("reconcile")
    assert (
        reconcile_job.coalesce
        and reconcile_job.misfire_grace_time == 3600
        and reconcile_job.max_instances == 1
    )
    assert str(reconcile_job.trigger) == str(trigger_for(settings))
    caplog.set_level(logging.INFO, logger="reconciler.schedule")
    sched.start()
    try:
        deadline = time.monotonic() + 60
        while not [r for r in caplog.records if r.name == "reconciler.schedule"]:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        while True:
            with scenario.engine.connect() as conn:
                runs = conn.execute(select(RECON_RUNS.c.trigger, RECON_RUNS.c.status)).all()
                snaps = conn.execute(
                    select(QUEUE_SNAPSHOTS.c.source, QUEUE_SNAPSHOTS.c.unprocessed)
                ).all()
            if runs and str(runs[0].status) != "running" and snaps:
                break
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        sched.shutdown(wait=True)
    assert [(t, str(s)) for t, s in runs] == [("schedule", "succeeded")]
    assert ("stripe", 2) in [(s, n) for s, n in snaps]  # the two stuck events
    # the run's summary in the scheduler's own log, with its run id as a field
    [line] = [
        r
        for r in caplog.records
        if r.name == "reconciler.schedule" and r.getMessage().startswith("reconciliation of")
    ]
    found = {k for k, _, _ in scenario.expected}
    assert line.getMessage().startswith("reconciliation of stripe succeeded: 150 records, found ")
    assert all(f"{kind} " in line.getMessage() for kind in found)
    assert ", resolved 0, open " in line.getMessage()
    assert line.__dict__["run_id"] and line.__dict__["source"] == "stripe"
    bad = settings.model_copy(
        update={"reconcile": settings.reconcile.model_copy(update={"schedule": "61 * * * *"})}
    )
    from reconciler.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"\[reconcile\] schedule: '61 \* \* \* \*' is not a valid cron"
    ):
        trigger_for(bad)


def test_cli_backfill_redeliver_asks_github_and_is_audited(
    db_url: str,
    engine: Engine,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from reconciler.cli.main import main
    from reconciler.storage.models import AUDIT_LOG

    monkeypatch.setenv("T_SBX_GH", "ghp_sandbox")
    world = build_world(
        seed=3, stripe_events=0, github_deliveries=10, shopify_orders=0, github_failure_rate=1.0
    )
    server = start_server(Sandbox(world).app)
    try:
        cfg = tmp_path / "c.toml"
        cfg.write_text(
            f'[database]\nurl = "{db_url}"\n[[sources]]\nname = "gh"\nkind = "github"\nbase_url = "{server.url}"\n'
            'api_key_env = "T_SBX_GH"\nrepository = "octocat/Hello-World"\nhook_id = 1\n'
        )
        failed = world.github_attempts[-1]
        assert (
            main(
                [
                    "backfill",
                    failed.guid,
                    "--source",
                    "gh",
                    "--redeliver",
                    "--reason",
                    "endpoint was down",
                    "--config",
                    str(cfg),
                ]
            )
            == 0
        )
        assert capsys.readouterr().out.strip().endswith("redelivery_requested")
        redelivered = [a for a in world.github_attempts if a.guid == failed.guid and a.redelivery]
        assert len(redelivered) == 1 and redelivered[0].status == "OK"
    finally:
        server.stop()
    with engine.connect() as conn:
        audit = conn.execute(
            select(AUDIT_LOG.c.action, AUDIT_LOG.c.event_id, AUDIT_LOG.c.reason)
        ).one()
    assert tuple(audit) == ("redeliver", failed.guid, "endpoint was down")


@pytest.mark.slow
def test_a_killed_run_blocks_the_next_only_until_its_lease_runs_out(
    scenario: Scenario, db_url: str, tmp_path: Any
) -> None:
    """kill -9 mid-scan: a rerun at once is skipped (exit 3, naming the holder); once the lease
    (10 s here) has gone unrenewed the next run takes over and resumes the dead run's scan."""
    import os
    import signal
    import time

    from reconciler.cursors import load_cursor
    from reconciler.storage.engine import make_engine

    cfg = write_config(tmp_path / "c.toml", scenario, db_url)
    text = (tmp_path / "c.toml").read_text()
    (tmp_path / "c.toml").write_text(
        text.replace("[reconcile]\n", "[reconcile]\nlease_seconds = 10\n")
    )
    exe = [sys.executable, "-m", "reconciler.cli.main"]
    env = dict(os.environ, T_SBX_KEY="sk_test_sandbox")
    scenario.sandbox.faults = Faults(slow_ms=400)
    victim = subprocess.Popen([*exe, "reconcile", "--config", cfg], env=env)
    # a reader that never queues for SQLite's write lock (the run holds it during a page)
    watcher = make_engine(db_url, readonly=True)
    try:
        deadline = time.monotonic() + 30
        while True:  # wait until a page and the cursor after it are committed
            with watcher.connect() as conn:
                if load_cursor(conn, "stripe"):
                    break
            assert time.monotonic() < deadline and victim.poll() is None
            time.sleep(0.05)
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        watcher.dispose()
    killed_at = time.monotonic()
    scenario.sandbox.faults = Faults()
    skipped = subprocess.run(
        [*exe, "reconcile", "--config", cfg, "--json"], env=env, capture_output=True, text=True
    )
    assert skipped.returncode == 3, skipped.stderr
    [run] = json.loads(skipped.stdout)["runs"]
    assert run["status"] == "skipped" and "held by" in run["error"] and " since " in run["error"]
    time.sleep(max(0.0, 10.5 - (time.monotonic() - killed_at)))
    resumed = subprocess.run(
        [*exe, "reconcile", "--config", cfg, "--json"], env=env, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    [run] = json.loads(resumed.stdout)["runs"]
    assert run["status"] == "succeeded" and 0 < run["records_scanned"] < 150  # resumed, not redone
    assert scenario.found() == scenario.expected
