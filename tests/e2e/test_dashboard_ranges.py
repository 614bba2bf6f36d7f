"""Ranges on every list page (AppTest on a seeded SQLite database): Events and Dead letters take
the Overview's ``range=now-…``; a range keeps the text it was written with; a range that cannot be
read says so instead of silently becoming 24 hours."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.e2e.test_dashboard_app import APP, Dash, _configure


@pytest.fixture
def dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dash]:
    engine, expected = _configure(tmp_path, monkeypatch)
    yield Dash(engine, expected)
    engine.dispose()


def _open(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.query_params.clear()
    at.switch_page(f"views/{page}.py")
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _shown_ids(at: AppTest) -> set[str]:
    return {str(v) for frame in at.dataframe for v in frame.value.get("event_id", [])}


def test_events_take_a_relative_range_and_keep_it_in_the_url(dash: Dash) -> None:
    at = _open("events", range="now-1h")
    assert at.selectbox(key="e_received").value == "Last hour"
    shown = _shown_ids(at)
    assert {"evt_1", "evt_2", "evt_3"} <= shown  # received 8-10 minutes ago
    assert "evt_old" not in shown and "gh_old" not in shown  # 2 hours and 3 days ago
    assert at.query_params["range"] == "now-1h"
    at.selectbox(key="e_received").set_value("Any time").run()
    assert {"evt_old", "gh_old"} <= _shown_ids(at)
    assert "range" not in at.query_params


def test_dead_letters_take_a_relative_range(dash: Dash) -> None:
    at = _open("dead_letters", range="now-90m")
    assert at.selectbox(key="dl_received").value == "Last 90 minutes"
    assert any("1 event selected" in m.value for m in at.markdown)  # evt_dead, 7 minutes ago
    at = _open("dead_letters", range="now-2m")
    assert any("0 events selected" in m.value for m in at.markdown)


@pytest.mark.parametrize("page", ["overview", "events"])
def test_a_range_keeps_the_text_it_was_written_with(dash: Dash, page: str) -> None:
    at = _open(page, range="now-24h")
    assert at.query_params["range"] == "now-24h"  # not rewritten to now-1d


@pytest.mark.parametrize("page", ["overview", "events", "dead_letters"])
def test_a_range_that_cannot_be_read_says_so(dash: Dash, page: str) -> None:
    at = _open(page, range="yesterday-ish")
    assert any("'yesterday-ish' is not a range like now-1h" in w.value for w in at.warning)


def test_a_dead_letter_notifications_link_shows_the_events_it_counts(dash: Dash) -> None:
    """The notice's link names when its events were received (``from``/``to``, not a range
    relative to now), so opened hours later it still shows those events: here evt_dead."""
    from datetime import timedelta
    from urllib.parse import parse_qs, urlsplit

    from reconciler.notify.detect import _dead_letter_facts
    from reconciler.notify.notices import render
    from reconciler.storage.types import utcnow

    now = utcnow()
    with dash.engine.connect() as conn:
        [fact] = _dead_letter_facts(conn, "hook", now - timedelta(days=1), now, timedelta(0), set())
    [(_, link)] = render(fact.kind, fact.data, "https://ops.example.com").links
    query = parse_qs(urlsplit(link).query)
    assert set(query) == {"source", "from", "to"}
    at = _open("dead_letters", **{k: v[0] for k, v in query.items()})
    assert at.selectbox(key="dl_received").value == "Custom"
    assert any("1 event selected" in m.value for m in at.markdown)  # evt_dead
