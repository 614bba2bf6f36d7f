"""The Overview's health strip through AppTest on a seeded SQLite database: a source whose last
run failed is red on the strip and in its section, with the error's first line; the Runs table
shows that line and the run its full text; a warning can be silenced by an operator (audited)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import streamlit as st
from sqlalchemy import insert, select
from streamlit.testing.v1 import AppTest

from reconciler.storage.models import AUDIT_LOG, RECON_RUNS
from reconciler.storage.types import utcnow
from tests.e2e.test_dashboard_app import APP, Dash, _configure

ERROR = "source stripe: the API answered 401 Unauthorized\nTraceback (most recent call last): …"


@pytest.fixture
def dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dash]:
    engine, expected = _configure(tmp_path, monkeypatch)
    now = utcnow()
    with engine.begin() as conn:  # after the seed's succeeded run-1 (29 minutes ago): a failure
        conn.execute(
            insert(RECON_RUNS).values(
                run_id="run-failed",
                source="stripe",
                trigger="schedule",
                status="failed",
                started_at=now - timedelta(minutes=3),
                finished_at=now - timedelta(minutes=2),
                window_start=now - timedelta(days=1),
                window_end=now,
                records_scanned=0,
                counts={},
                error=ERROR,
            )
        )
    yield Dash(engine, expected)
    engine.dispose()


def _strip(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if "-badge[" in m.value]


def test_a_failed_last_run_is_red_on_the_strip_and_in_its_section(dash: Dash) -> None:
    at = dash.app()
    strip = _strip(at)
    assert any(s.startswith(":red-badge[ACT] Reconciled: stripe: **failed 2 min") for s in strip)
    assert "source stripe: the API answered 401 Unauthorized" in [c.value for c in at.caption]
    errors = [e.value for e in at.error]
    assert any(
        e.startswith("The last reconciliation of stripe failed 2 min")
        and e.endswith("ago: source stripe: the API answered 401 Unauthorized")
        for e in errors
    ), errors


def test_the_runs_table_has_the_first_line_and_the_run_its_full_text(dash: Dash) -> None:
    at = dash.app("runs")
    table = at.dataframe[0].value
    failed = table[table["run_id"] == "run-failed"]
    assert list(failed["error"]) == ["source stripe: the API answered 401 Unauthorized"]
    assert any(ERROR.splitlines()[1] in c.value for c in at.code)  # the full text, on the run


def test_a_warning_is_silenced_with_a_reason_and_audited(dash: Dash) -> None:
    at = dash.app()
    assert ":orange-badge[CHECK] Scheduler: **never seen**" in _strip(at)  # no scheduler ran
    at.selectbox(key="ov_silence_which").set_value("Scheduler")  # one popover for every warning
    at.text_input(key="ov_silence_why").input("a demo machine: no scheduler")
    at.selectbox(key="ov_silence_for").set_value("1 day")
    next(b for b in at.button if b.label == "Silence 'Scheduler'").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert ":gray-badge[SILENCED] Scheduler: **never seen**" in _strip(at)
    assert any(
        c.value.startswith("silenced by anonymous@localhost until")
        and c.value.endswith("UTC: a demo machine: no scheduler")
        for c in at.caption
    )
    with dash.engine.connect() as conn:
        audit = conn.execute(select(AUDIT_LOG.c.action, AUDIT_LOG.c.target)).all()
    assert [tuple(a) for a in audit] == [("health.silenced", "Scheduler")]


def test_the_bare_address_lands_on_issues_while_one_is_open(dash: Dash) -> None:
    """With an open issue the session's first page at ``/`` is Issues; a link with parameters
    (``/?range=now-1h``) and every later visit to the Overview stay on the Overview."""
    from reconciler.issues.refresh import refresh

    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert [t.value for t in at.title] == ["Overview"]  # nothing grouped yet
    refresh(dash.engine, utcnow(), auto_resolve_after=timedelta(days=1))  # evt_dead: an issue
    st.cache_data.clear()  # (the count is cached for cache_ttl_seconds, like every figure)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Issues"]
    at.switch_page("views/overview.py").run()
    assert [t.value for t in at.title] == ["Overview"]
    linked = AppTest.from_file(APP, default_timeout=60)
    linked.query_params["range"] = "now-1h"
    linked.run()
    assert [t.value for t in linked.title] == ["Overview"]
