"""The Outbox page through Streamlit's AppTest (issue 46): a message permalink shows the message
first with the list one click back, a replay offers nothing until messages are chosen, "Recover
since" starts a day back and counts deaths, the views log no Arrow conversion traceback, and each
target shows its success rate and is paused and resumed from the page, audited."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, insert, select, update
from streamlit.testing.v1 import AppTest

from reconciler.storage.models import AUDIT_LOG, OUTBOX, OUTBOX_ATTEMPTS, OUTBOX_PAUSES
from tests.e2e.test_dashboard_app import APP, _button, _configure, _outbox


@pytest.fixture
def engine_(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    engine, _ = _configure(tmp_path, monkeypatch)
    yield engine
    engine.dispose()


def _open(**params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("views/outbox.py")
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _subheaders(at: AppTest) -> list[str]:
    return [s.value for s in at.subheader]


def test_a_message_permalink_shows_the_message_first_and_the_list_one_click_back(
    engine_: Engine,
) -> None:
    ids = _outbox(engine_)
    at = _open(message=str(ids["crm-dead"]), range="now-1h")
    # the message is the page's first item: no target panels, charts or message list above it
    assert _subheaders(at) == [f"Message #{ids['crm-dead']} to crm"]
    assert not at.get("plotly_chart") and len(at.dataframe) == 1  # its attempts only
    assert any("crm answered HTTP 400" in e.value for e in at.error)
    assert dict(at.query_params) == {"message": str(ids["crm-dead"]), "range": "now-1h"}

    _button(at, "← All messages").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert _subheaders(at)[:2] == ["crm", "Messages"]
    assert at.selectbox(key="ob_range").value == "Last hour"  # the list as the link had it
    assert "message" not in at.query_params and at.query_params["range"] == "now-1h"

    at.selectbox(key="ob_pick").set_value(ids["crm-sent"]).run()  # picked: the message first
    assert _subheaders(at) == [f"Message #{ids['crm-sent']} to crm"]
    assert at.query_params["message"] == str(ids["crm-sent"])


def test_a_replay_with_no_message_chosen_offers_nothing(engine_: Engine) -> None:
    ids = _outbox(engine_)
    at = _open()
    assert at.multiselect(key="ob_dead_pick").value == []
    assert "ob_confirm" not in [c.key for c in at.checkbox]
    assert "Replay" not in [b.label for b in at.button]
    assert any("none is chosen" in c.value for c in at.caption)
    at.multiselect(key="ob_dead_pick").set_value([ids["crm-dead"]]).run()
    assert at.checkbox(key="ob_confirm").label == "Yes, replay 1 message with their keys"


def test_recover_since_starts_a_day_back_and_counts_when_messages_died(engine_: Engine) -> None:
    ids = _outbox(engine_)
    now = datetime.now(UTC)
    with engine_.begin() as conn:  # written three days ago, dead since an hour ago
        conn.execute(
            update(OUTBOX)
            .where(OUTBOX.c.id == ids["crm-dead"])
            .values(created_at=now - timedelta(days=3), dead_at=now - timedelta(hours=1))
        )
    at = _open()
    day, at_time = at.date_input(key="ob_recover_day").value, at.time_input(key="ob_recover_time")
    since = datetime.combine(day, at_time.value, UTC)
    assert now - timedelta(hours=24, minutes=6) <= since <= now - timedelta(hours=23, minutes=59)
    assert any("1 message of crm went dead since" in c.value for c in at.caption)
    assert (
        at.checkbox(key="ob_recover_confirm").label == "Yes, send this message again with its key"
    )


def test_the_outbox_views_log_no_arrow_conversion_traceback(engine_: Engine) -> None:
    """An attempt without an HTTP status (a lease that ran out) beside one with a status, and a
    pending message beside a sent one: each column keeps one type."""
    ids = _outbox(engine_)
    now = datetime.now(UTC)
    with engine_.begin() as conn:
        conn.execute(
            insert(OUTBOX_ATTEMPTS).values(
                message_id=ids["crm-dead"],
                target="crm",
                attempt=2,
                publisher="(lease expired)",
                started_at=now,
                finished_at=now,
                outcome="failed",
                status_code=None,
            )
        )
        conn.execute(
            update(OUTBOX).where(OUTBOX.c.id == ids["crm-sent"]).values(last_status_code=202)
        )
    logged: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = logged.append  # type: ignore[method-assign]
    arrow_log = logging.getLogger("streamlit.dataframe_util")
    level = arrow_log.level
    arrow_log.addHandler(handler)
    arrow_log.setLevel(logging.DEBUG)
    try:
        listed = _open()
        shown = _open(message=str(ids["crm-dead"]))
    finally:
        arrow_log.removeHandler(handler)
        arrow_log.setLevel(level)
    assert list(listed.dataframe[0].value["last_status_code"]) == ["-", "202"]
    assert list(shown.dataframe[0].value["status_code"]) == ["400", "-"]
    assert [r.getMessage() for r in logged if r.exc_info or "onver" in r.getMessage()] == []


def test_a_target_shows_its_success_rate_and_is_paused_and_resumed_from_the_page(
    engine_: Engine,
) -> None:
    ids = _outbox(engine_)  # in range: one attempt sent, one dead
    at = _open()
    metric = next(m for m in at.metric if m.label == "Success rate in range")
    assert metric.value == "50.0%"

    at.text_input(key="ob_pause_0_reason").input("CRM maintenance")
    at.checkbox(key="ob_pause_0_confirm").check()
    _button(at, "Pause").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("crm paused" in s.value for s in at.success)
    assert _subheaders(at)[0] == "crm (paused)"
    note = next(m.value for m in at.markdown if "**Paused** by" in m.value)
    assert "anonymous@localhost" in note and "CRM maintenance" in note
    message = _open(message=str(ids["crm-dead"]))
    assert any("**Paused** by `anonymous@localhost`" in m.value for m in message.markdown)

    at.text_input(key="ob_pause_0_reason").input("CRM back")
    at.checkbox(key="ob_pause_0_confirm").check()
    _button(at, "Resume").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert _subheaders(at)[0] == "crm"
    with engine_.connect() as conn:
        audit = conn.execute(
            select(AUDIT_LOG.c.action, AUDIT_LOG.c.actor, AUDIT_LOG.c.reason).order_by(
                AUDIT_LOG.c.id
            )
        ).all()
        assert conn.execute(select(OUTBOX_PAUSES)).all() == []
    assert [tuple(a) for a in audit] == [
        ("outbox.pause", "anonymous@localhost", "CRM maintenance"),
        ("outbox.resume", "anonymous@localhost", "CRM back"),
    ]


def test_a_viewer_sees_a_pause_but_cannot_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, _ = _configure(tmp_path, monkeypatch, auth=True)
    try:
        _outbox(engine)
        with engine.begin() as conn:
            conn.execute(
                insert(OUTBOX_PAUSES).values(
                    target="crm",
                    paused_by="ops@example.com",
                    paused_at=datetime.now(UTC),
                    reason="upgrade",
                )
            )
        at = _open()
        assert _subheaders(at)[0] == "crm (paused)"
        assert not {"Pause", "Resume"} & {b.label for b in at.button}
        assert not [e for e in at.expander if "sending to" in (e.label or "")]
    finally:
        engine.dispose()
