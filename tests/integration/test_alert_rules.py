"""deploy/prometheus: the alert rules are valid and unit-tested by promtool, and every hookledger
metric they name is one a receiver exports."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sqlalchemy import Engine

from reconciler.inbox.receiver import create_app
from tests.conftest import make_settings
from tests.deliveries import github_delivery

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("HOOKLEDGER_E2E_REQUIRED"):  # CI installs Debian's prometheus package
            pytest.fail("promtool is not installed (apt-get install prometheus)")
        pytest.skip("promtool is not installed")
    return found


@pytest.mark.parametrize(
    "command", [["check", "rules", "alerts.yml"], ["test", "rules", "alerts_test.yml"]]
)
def test_promtool_accepts_and_tests_the_rules(command: list[str]) -> None:
    result = subprocess.run(
        [promtool(), *command], cwd=RULES, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_unit_tested() -> None:
    rules = yaml.safe_load((RULES / "alerts.yml").read_text())
    alerts = {r["alert"] for group in rules["groups"] for r in group["rules"]}
    tests = yaml.safe_load((RULES / "alerts_test.yml").read_text())
    fired = {
        case["alertname"]
        for test in tests["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert alerts == fired  # each alert has a case in which it fires


def test_the_rules_name_only_metrics_hookledger_exports(
    db_url: str, engine: Engine, serve: Any
) -> None:
    settings = make_settings(
        db_url, outbox={"targets": [{"name": "crm", "url": "http://127.0.0.1:9/hooks"}]}
    )
    url = serve(create_app(settings, engine)).url
    headers, body = github_delivery("g-1")
    httpx.post(f"{url}/webhooks/github", content=body, headers=headers)
    httpx.post(f"{url}/webhooks/github", content=b"{}", headers={"X-Hub-Signature-256": "sha256=0"})
    text = httpx.get(f"{url}/metrics").text
    # every family is declared (# TYPE) even while it has no series: no open discrepancy, no failure
    declared = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    samples = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1] != "#"}
    exported = declared | samples
    named = set(re.findall(r"\bhookledger_[a-z_]+", (RULES / "alerts.yml").read_text()))
    assert named and named <= exported, sorted(named - exported)
