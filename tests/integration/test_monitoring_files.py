"""deploy/: the alert rules are valid and unit-tested by promtool, the Grafana dashboard's queries are
valid PromQL, and every metric either names is one hookledger exports (a receiver's /metrics, a
worker's)."""

from __future__ import annotations

import json
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

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus"
DASHBOARD = DEPLOY / "grafana" / "hookledger.json"
METRIC = re.compile(r"\b(?:hookledger|process)_[a-z_]+")


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


def exported_metrics(db_url: str, engine: Engine, serve: Any) -> set[str]:
    """Every metric name a receiver and a worker export, with the sample names of each family."""
    from prometheus_client import generate_latest

    from reconciler.inbox.worker_metrics import WorkerMetrics

    settings = make_settings(
        db_url, outbox={"targets": [{"name": "crm", "url": "http://127.0.0.1:9/hooks"}]}
    )
    url = serve(create_app(settings, engine)).url
    headers, body = github_delivery("g-1")
    httpx.post(f"{url}/webhooks/github", content=body, headers=headers)
    httpx.post(f"{url}/webhooks/github", content=b"{}", headers={"X-Hub-Signature-256": "sha256=0"})
    text = httpx.get(f"{url}/metrics").text + generate_latest(WorkerMetrics().registry).decode()
    names: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):  # declared even while it has no series
            _, _, name, kind = line.split()
            suffixes = {
                "counter": ("_total", "_created"),
                "histogram": ("_bucket", "_count", "_sum", "_created"),
            }.get(kind, ())
            names |= {name, *(name + s for s in suffixes)}
        elif line:
            names.add(line.split("{")[0].split(" ")[0])
    return names


def test_the_rules_name_only_metrics_hookledger_exports(
    db_url: str, engine: Engine, serve: Any
) -> None:
    exported = exported_metrics(db_url, engine, serve)
    named = set(METRIC.findall((RULES / "alerts.yml").read_text()))
    assert named and named <= exported, sorted(named - exported)


def dashboard_queries() -> list[str]:
    document = json.loads(DASHBOARD.read_text())
    return [t["expr"] for panel in document["panels"] for t in panel["targets"]]


def test_the_dashboard_queries_name_only_metrics_hookledger_exports(
    db_url: str, engine: Engine, serve: Any
) -> None:
    exported = exported_metrics(db_url, engine, serve)
    queries = dashboard_queries()
    named = {name for expr in queries for name in METRIC.findall(expr)}
    assert len(queries) >= 15 and named <= exported, sorted(named - exported)
    document = json.loads(DASHBOARD.read_text())
    assert document["uid"] == "hookledger" and document["templating"]["list"][0]["type"] == (
        "datasource"
    )
    ids = [panel["id"] for panel in document["panels"]]
    assert len(ids) == len(set(ids))


def test_the_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    # promtool parses a rule file's expressions: the dashboard's, as recording rules
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"hookledger_dashboard:query_{i}", "expr": expr}
                    for i, expr in enumerate(dashboard_queries())
                ],
            }
        ]
    }
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
