"""The Issues page through Streamlit's AppTest: the list, an issue's permalink (the URL decides
which issue is shown, run after run), and an operator's acknowledge, retry and resolve, each
audited; a viewer sees the issue and no button."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select
from streamlit.testing.v1 import AppTest

from reconciler.issues.refresh import refresh
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import AUDIT_LOG, INBOX_EVENTS, ISSUES
from reconciler.storage.types import utcnow
from tests.dashboard_data import write_config
from tests.integration.test_issues import dead_event

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def _db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, auth: bool) -> Engine:
    url = f"sqlite:///{tmp_path / 'issues.db'}"
    engine = make_engine(url)
    upgrade(engine)
    now = utcnow()
    for k in range(3):
        dead_event(engine, now - timedelta(minutes=9 - k), f"unknown plan 'p{k}'")
    dead_event(engine, now - timedelta(minutes=1), "ledger down", source="github")
    refresh(engine, now)
    monkeypatch.setenv("HOOKLEDGER_CONFIG", str(write_config(tmp_path, url, auth=auth)))
    return engine


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    eng = _db(tmp_path, monkeypatch, auth=False)
    yield eng
    eng.dispose()


def _ids(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(conn.execute(select(ISSUES.c.source, ISSUES.c.id)).all())  # type: ignore[arg-type]


def _page(issue: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("views/issues.py")
    if issue is not None:
        at.query_params["id"] = issue
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _button(at: AppTest, label: str) -> Any:
    matches = [b for b in at.button if b.label == label]
    assert matches, f"no button '{label}' in {[b.label for b in at.button]}"
    return matches[0]


def _shown(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("### Issue #")]


def test_the_list_shows_each_issue_with_its_count(engine: Engine) -> None:
    at = _page()
    table = at.dataframe[0].value
    assert sorted(zip(table["source"], table["count"], strict=True)) == [
        ("github", 1),
        ("stripe", 3),
    ]
    assert "unknown plan <str>" in list(table["signature"])


def test_the_url_decides_which_issue_is_shown(engine: Engine) -> None:
    ids = _ids(engine)
    at = _page(str(ids["stripe"]))
    assert _shown(at) == [f"### Issue #{ids['stripe']}: open · dead event · stripe · invoice.paid"]
    assert any(f"/issues?id={ids['stripe']}" in c.value for c in at.caption)
    at.query_params["id"] = str(ids["github"])  # a link to another issue, in the same session
    at.run()
    assert _shown(at) == [f"### Issue #{ids['github']}: open · dead event · github · invoice.paid"]


@pytest.mark.parametrize("raw", ["abc", "0", "-1", "9" * 30])
def test_a_malformed_id_shows_the_list_and_an_unknown_one_says_so(engine: Engine, raw: str) -> None:
    at = _page(raw)
    assert _shown(at) == [] and len(at.dataframe) == 1
    at = _page("999")
    assert [e.value for e in at.error] == ["no issue 999"]


def test_an_operator_acknowledges_retries_and_resolves_each_audited(engine: Engine) -> None:
    issue = _ids(engine)["stripe"]
    at = _page(str(issue))
    _button(at, "Acknowledge").click().run()
    assert not at.exception and _shown(at)[0].startswith(f"### Issue #{issue}: acknowledged")

    at.text_input(key="iss_retry_reason").input("plans loaded")
    at.checkbox(key="iss_retry_confirm").check()
    _button(at, "Retry 3 dead events").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("3 events put back to pending" in s.value for s in at.success)

    at.text_input(key="iss_resolve_reason").input("fixed upstream")
    at.checkbox(key="iss_resolve_confirm").check()
    _button(at, "Resolve").click().run()
    assert _shown(at)[0].startswith(f"### Issue #{issue}: resolved")
    assert at.query_params["id"] == str(issue)
    with engine.connect() as conn:
        audit = conn.execute(
            select(AUDIT_LOG.c.action, AUDIT_LOG.c.reason).order_by(AUDIT_LOG.c.id)
        ).all()
        statuses = set(conn.execute(select(INBOX_EVENTS.c.source, INBOX_EVENTS.c.status)).all())
    assert [tuple(a) for a in audit] == [
        ("issue.acknowledge", None),
        ("replay.bulk", "plans loaded"),
        ("issue.resolve", "fixed upstream"),
    ]
    assert statuses == {("stripe", "pending"), ("github", "dead")}


def test_a_viewer_sees_the_issue_and_no_button(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _db(tmp_path, monkeypatch, auth=True)
    at = _page(str(_ids(engine)["stripe"]))
    assert not {"Acknowledge", "Resolve", "Retry 3 dead events"} & {b.label for b in at.button}
    assert any("Read-only" in i.value for i in at.info)
    engine.dispose()
