"""hookledger demo (small, no dashboard): the reconciliation equals the ground truth it writes."""

from __future__ import annotations

import csv
import io
import json
import logging
from pathlib import Path

import pytest
from rich.console import Console

from connectors.sandbox.world import PLANTED_CARDS, PLANTED_IBAN
from reconciler.cli.main import main
from reconciler.demo.run import DEMO_ENV, DemoOptions, run_demo
from reconciler.logs import _FieldsFormatter

pytestmark = pytest.mark.slow


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("demo") / "var" / "demo"
    out = io.StringIO()
    logs = _Collect()
    logs.setFormatter(_FieldsFormatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(logs)
    try:
        result = run_demo(
            DemoOptions(
                directory=directory,
                seed=5,
                events=400,
                dashboard=False,
                console=Console(file=out, width=120),
            )
        )
    finally:
        root.removeHandler(logs)
    assert result.differences == [], out.getvalue()
    assert "found exactly what the sandbox did" in out.getvalue()
    # what the demo said and logged, for the test that greps it for planted secrets
    (directory.parent / "console.txt").write_text(out.getvalue())
    (directory.parent / "logs.txt").write_text("\n".join(logs.lines))
    return directory


def test_the_reconciliation_equals_the_ground_truth(demo: Path) -> None:
    truth = json.loads((demo / "truth.json").read_text())
    expected = truth["expected_open_discrepancies"]
    # every fault the issue lists is in the traffic, so each kind is really checked
    assert expected["stripe"]["missing"] > 0 and expected["github"]["missing"] > 0
    assert expected["shopify"]["missing"] > 0
    assert expected["stripe"]["duplicate"] >= 3  # the non-idempotent ledger path
    assert expected["stripe"]["diverged"] > 0 and expected["shopify"]["diverged"] > 0
    assert expected["stripe"]["unapplied"] > 0 and expected["shopify"]["unapplied"] > 0
    assert expected["stripe"]["dead"] > 0 and expected["github"]["dead"] > 0
    # the providers reconciled by their event lists (issue 48): a dropped delivery each at least
    assert expected["paddle"]["missing"] > 0 and expected["gocardless"]["missing"] > 0
    deliveries = truth["deliveries"]
    assert all(d["duplicated"] and d["reordered"] for d in deliveries.values())
    assert truth["handler_faults"]["transient"] and truth["tampering"]["invoice_status"]


def test_other_commands_work_on_the_demo_workspace(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(demo / "config.toml")
    assert main(["export", "--config", config, "-o", "-"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    truth = json.loads((demo / "truth.json").read_text())["expected_open_discrepancies"]
    assert len(rows) == sum(sum(kinds.values()) for kinds in truth.values())
    dead = next(r for r in rows if r["kind"] == "dead")
    assert (
        main(["events", "show", dead["event_id"], "--source", dead["source"], "--config", config])
        == 0
    )
    assert "dead" in capsys.readouterr().out
    # the worker command loads the demo's handlers from the config: a replayed dead letter fails
    # again for the same planted reason and is dead again
    args = ["--source", dead["source"], "--config", config]
    assert main(["replay", dead["event_id"], *args, "--reason", "try again"]) == 0
    assert main(["worker", "--once", "--config", config]) == 0
    capsys.readouterr()
    assert main(["events", "show", dead["event_id"], *args, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["event"]["status"] == "dead" and "demo:" in shown["event"]["last_error"]


def test_a_rerun_starts_from_a_fresh_workspace(demo: Path) -> None:
    result = run_demo(
        DemoOptions(
            directory=demo, seed=6, events=120, dashboard=False, console=Console(file=io.StringIO())
        )
    )
    assert result.differences == []


def test_a_busy_dashboard_port_stops_the_demo_before_it_starts(tmp_path: Path) -> None:
    import socket

    from reconciler.errors import HookledgerError

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(HookledgerError, match=f"port {port} on 127.0.0.1 is in use"):
            run_demo(DemoOptions(directory=tmp_path / "d", dashboard=True, dashboard_port=port))
    assert not (tmp_path / "d").exists()  # nothing was written


def test_nothing_the_demo_shows_leaks_planted_payment_data_or_secrets(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its console and logs, every file it writes but the credentials' own demo.env, the CSV
    export and events show (text and JSON) of events that carry card numbers and an IBAN."""
    config = str(demo / "config.toml")
    shown = [(demo.parent / "console.txt").read_text(), (demo.parent / "logs.txt").read_text()]
    for path in sorted(demo.rglob("*")):
        if path.is_file() and path.suffix in (".json", ".toml", ".txt", ".log", ".csv"):
            shown.append(path.read_text())
    assert main(["export", "--config", config, "-o", "-", "--status", "all"]) == 0
    shown.append(capsys.readouterr().out)
    truth = json.loads((demo / "truth.json").read_text())
    charges = [e for e in _stripe_event_ids(demo) if e.startswith("evt_")][:20]
    assert charges
    for event_id in charges:
        for extra in ([], ["--json"]):
            code = main(
                ["events", "show", event_id, "--source", "stripe", *extra, "--config", config]
            )
            assert code == 0
            captured = capsys.readouterr()
            shown += [captured.out, captured.err]
    planted = [*PLANTED_CARDS, PLANTED_IBAN, *(v for k, v in DEMO_ENV.items() if "SECRET" in k)]
    text = "\n".join(shown)
    assert "<masked>" in text and truth
    assert [p for p in planted if p in text] == []


def _stripe_event_ids(demo: Path) -> list[str]:
    """The inbox's charge events (they carry the planted payment data)."""
    from sqlalchemy import select

    from reconciler.storage.engine import make_engine
    from reconciler.storage.models import INBOX_EVENTS

    engine = make_engine(f"sqlite:///{demo / 'hookledger.db'}")
    try:
        with engine.connect() as conn:
            return list(
                conn.execute(
                    select(INBOX_EVENTS.c.event_id).where(
                        INBOX_EVENTS.c.source == "stripe",
                        INBOX_EVENTS.c.event_type == "charge.succeeded",
                    )
                ).scalars()
            )
    finally:
        engine.dispose()


def test_the_demo_shows_the_inbox_promises(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A conflicting redelivery, ambiguous failures settled by verify, and a correlation id that
    reaches the business rows."""
    import sqlite3

    truth = json.loads((demo / "truth.json").read_text())
    assert truth["expected_open_discrepancies"]["stripe"]["conflict"] == 1
    conflict = truth["conflicting_redelivery"]
    ambiguous = truth["handler_faults"]["ambiguous"]
    assert conflict and ambiguous
    with sqlite3.connect(demo / "hookledger.db") as db:
        [(outcome,)] = db.execute(
            "SELECT outcome FROM deliveries WHERE event_id = ? AND body IS NOT NULL", (conflict,)
        ).fetchall()
        settled = db.execute(
            "SELECT e.event_id FROM processing_attempts a JOIN inbox_events e "
            "ON e.id = a.inbox_event_id WHERE a.error LIKE 'verify: attempt 1 took effect%'"
        ).fetchall()
        paid = db.execute(
            "SELECT event_id, correlation_id FROM inbox_events WHERE event_type = 'invoice.paid' "
            "AND status = 'processed' LIMIT 1"
        ).fetchone()
    assert outcome == "conflict"
    assert sorted(e for (e,) in settled) == sorted(ambiguous)
    config = str(demo / "config.toml")
    assert (
        main(["events", "show", paid[0], "--source", "stripe", "--json", "--config", config]) == 0
    )
    shown = json.loads(capsys.readouterr().out)
    [invoices] = [b for b in shown["business_rows"] if b["table"] == "demo_invoices"]
    assert invoices["error"] is None and len(invoices["rows"]) == 1
    assert "correlation_id" in invoices["rows"][0]


def test_without_a_terminal_the_demo_says_its_progress_and_its_table_fits_100_columns(
    demo: Path,
) -> None:
    said = (demo.parent / "console.txt").read_text().splitlines()
    progress = [line for line in said if line.startswith("delivering a day of webhooks: ")]
    assert 5 <= len(progress) <= 11 and progress[-1].startswith(
        "delivering a day of webhooks: 100% "
    )
    start = next(i for i, line in enumerate(said) if "Open discrepancies found" in line)
    end = next(i for i, line in enumerate(said) if i > start and line.startswith("└"))
    table = said[start : end + 2]  # (and its caption)
    assert max(len(line.rstrip()) for line in table) <= 100
    assert any(line.startswith(("│ missing", "┃ kind")) for line in table)
