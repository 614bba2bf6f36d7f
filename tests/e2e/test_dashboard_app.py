"""Every dashboard page through Streamlit's AppTest on a seeded SQLite database."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select, update
from streamlit.testing.v1 import AppTest

from reconciler.outbox import add_message
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import (
    AUDIT_LOG,
    DISCREPANCIES,
    INBOX_EVENTS,
    OUTBOX,
    OUTBOX_ATTEMPTS,
    RECON_RUNS,
)
from tests.dashboard_data import Expected, seed, write_config

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
KPI_LABELS = (
    "Accepted",
    "Duplicate",
    "Rejected",
    "Processed",
    "Failed attempts",
    "Dead-lettered",
    "Pending now",
    "Oldest unprocessed",
)


class Dash:
    def __init__(self, engine: Engine, expected: Expected) -> None:
        self.engine = engine
        self.expected = expected

    def app(self, page: str | None = None) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        if page:
            at.query_params.clear()  # as the sidebar's link does: the Overview's range stays there
            at.switch_page(f"views/{page}.py")
            at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at


def _configure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, auth: bool = False
) -> tuple[Engine, Expected]:
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    engine = make_engine(url)
    upgrade(engine)
    expected = seed(engine)
    monkeypatch.setenv("HOOKLEDGER_CONFIG", str(write_config(tmp_path, url, auth=auth)))
    return engine, expected


@pytest.fixture
def dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dash]:
    engine, expected = _configure(tmp_path, monkeypatch)
    yield Dash(engine, expected)
    engine.dispose()


@pytest.fixture
def viewer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Dash]:
    engine, expected = _configure(tmp_path, monkeypatch, auth=True)
    yield Dash(engine, expected)
    engine.dispose()


def _button(at: AppTest, label: str) -> Any:
    matches = [b for b in at.button if b.label == label]
    assert matches, f"no button '{label}' in {[b.label for b in at.button]}"
    return matches[0]


def _audit(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                select(AUDIT_LOG.c.actor, AUDIT_LOG.c.action, AUDIT_LOG.c.reason).order_by(
                    AUDIT_LOG.c.id
                )
            )
        ]


def test_overview_kpis_match_independent_counts(dash: Dash) -> None:
    at = dash.app()
    assert [s.value for s in at.subheader] == ["stripe", "github", "shopify"]
    values = [m.value for m in at.metric]
    labels = [m.label for m in at.metric]
    assert labels == list(KPI_LABELS) * 2  # shopify has no data: a message instead of KPIs
    exp = dash.expected
    for i, source in enumerate(("stripe", "github")):
        got = dict(zip(KPI_LABELS, values[8 * i : 8 * i + 8], strict=True))
        assert got["Accepted"] == f"{exp.accepted[source]:,}"
        assert got["Duplicate"] == f"{exp.duplicate[source]:,}"
        assert got["Rejected"] == f"{exp.rejected[source]:,}"
        assert got["Processed"] == f"{exp.processed[source]:,}"
        assert got["Failed attempts"] == f"{exp.failed[source]:,}"
        assert got["Dead-lettered"] == f"{exp.dead_attempts[source]:,}"
        assert got["Pending now"] == f"{exp.pending_now[source]:,}"
    assert any("past stuck_after_seconds" in m.value for m in at.markdown)
    assert any("**diverged** 1, **missing** 1" in m.value for m in at.markdown)
    assert any("No deliveries, events or discrepancies for 'shopify'" in i.value for i in at.info)
    charts = at.get("plotly_chart")
    assert len(charts) == 5  # deliveries, processing, depth, age, runs


def test_overview_range_and_source_filters(dash: Dash) -> None:
    at = dash.app()
    at.selectbox(key="ov_range").set_value("Last 7 days").run()
    github = dict(zip(KPI_LABELS, [m.value for m in at.metric][8:16], strict=True))
    assert github["Accepted"] == "3"
    at.multiselect(key="ov_sources").set_value(["github"]).run()
    assert [s.value for s in at.subheader] == ["github"]


def test_discrepancy_filters_narrow_the_table(dash: Dash) -> None:
    at = dash.app("discrepancies")
    assert len(at.dataframe[-1].value) == 2  # open by default
    at.selectbox(key="d_status").set_value("all").run()
    assert len(at.dataframe[-1].value) == 3
    at.multiselect(key="d_kinds").set_value(["diverged"]).run()
    table = at.dataframe[-1].value
    assert list(table["object_id"]) == ["in_2"]
    at.multiselect(key="d_sources").set_value(["github"]).run()
    assert any("No discrepancy matches" in i.value for i in at.info)
    assert at.get("download_button")


def test_discrepancy_detail_and_ignore_writes_the_audit_row(dash: Dash) -> None:
    at = dash.app("discrepancies")
    at.multiselect(key="d_kinds").set_value(["diverged"]).run()
    did = int(at.dataframe[-1].value["id"].iloc[0])
    at.number_input(key="d_id").set_value(did).run()
    codes = [c.value for c in at.code]
    assert '"paid"' in codes and '"open"' in codes  # source beside local
    at.radio(key="d_action_kind").set_value("ignore")
    at.text_input(key="d_reason").input("known: billing migrates this invoice tonight")
    _button(at, "Apply").click().run()
    assert not at.success  # not confirmed: nothing happens
    assert _audit(dash.engine) == []
    at.checkbox(key="d_confirm").check()
    _button(at, "Apply").click().run()
    assert [s.value for s in at.success] == [f"discrepancy {did} marked ignored"]
    assert _audit(dash.engine) == [
        (
            "anonymous@localhost",
            "discrepancy.ignored",
            "known: billing migrates this invoice tonight",
        )
    ]
    with dash.engine.connect() as conn:
        statuses = {str(s) for (s,) in conn.execute(select(DISCREPANCIES.c.status))}
    assert "ignored" in statuses


def test_events_page_shows_the_timeline_masks_the_payload_and_replays(dash: Dash) -> None:
    at = dash.app("events")
    at.text_input(key="e_query").input("in_5").run()  # an object id
    assert [m.value for m in at.metric][:3] == ["dead", "webhook", "3"]
    timeline = at.table[0].value
    assert list(timeline["what"]).count("attempt") == 3
    payload = at.code[0].value
    assert "<masked>" in payload and "pi_secret_123" not in payload
    at.text_input(key="e_reason").input("plan 'gold' added")
    at.checkbox(key="e_confirm").check()
    _button(at, "Replay").click().run()
    assert at.success and "dead → pending" in at.success[0].value
    assert _audit(dash.engine) == [("anonymous@localhost", "replay", "plan 'gold' added")]
    at.run()  # the cache was cleared: the timeline shows the audit entry
    assert "replay by anonymous@localhost: plan 'gold' added" in list(at.table[0].value["summary"])


def test_dead_letters_replay_a_selection(dash: Dash) -> None:
    at = dash.app("dead_letters")
    groups = at.dataframe[0].value
    assert list(groups["dead events"]) == [1] and list(groups["source"]) == ["stripe"]
    at.text_input(key="dl_reason").input("fixed the plan table")
    at.checkbox(key="dl_confirm").check()
    _button(at, "Replay 1 event").click().run()
    assert at.success[0].value.startswith("1 event put back to pending (dead events (all);")
    with dash.engine.connect() as conn:
        status = conn.execute(
            select(INBOX_EVENTS.c.status).where(INBOX_EVENTS.c.event_id == "evt_dead")
        ).scalar_one()
    assert str(status) == "pending"
    at.run()
    assert at.success[0].value == "No dead-lettered events."


def test_runs_page_lists_history_and_schedule(dash: Dash) -> None:
    at = dash.app("runs")
    assert list(at.dataframe[0].value["run_id"]) == ["run-1"]
    assert any("Next scheduled reconciliation" in c.value for c in at.caption)
    assert any("No source can be reconciled" in i.value for i in at.info)


@pytest.mark.parametrize("page", ["discrepancies", "events", "dead_letters", "outbox"])
def test_a_viewer_cannot_act(viewer: Dash, page: str) -> None:
    at = viewer.app(page)
    if page == "discrepancies":
        at.number_input(key="d_id").set_value(int(at.dataframe[-1].value["id"].iloc[0])).run()
    if page == "events":
        at.text_input(key="e_query").input("evt_dead").run()
    labels = {b.label for b in at.button}
    assert not labels & {"Apply", "Replay"}
    assert any("Read-only" in (x.value or "") for x in [*at.info, *at.caption])


def test_reconcile_now_runs_with_a_progress_bar_and_is_audited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from connectors.sandbox.app import Sandbox
    from connectors.sandbox.world import build_world
    from tests.conftest import start_server

    monkeypatch.setenv("T_SBX_KEY", "sk_test_sandbox")
    world = build_world(
        seed=3,
        now=datetime.now(UTC) - timedelta(hours=1),
        stripe_events=40,
        github_deliveries=0,
        shopify_orders=0,
    )
    server = start_server(Sandbox(world).app)
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    engine = make_engine(url)
    try:
        upgrade(engine)
        extra = f'base_url = "{server.url}"\napi_key_env = "T_SBX_KEY"\npage_size = 10\n'
        monkeypatch.setenv(
            "HOOKLEDGER_CONFIG", str(write_config(tmp_path, url, stripe_extra=extra))
        )
        at = Dash(engine, seed(engine)).app("runs")
        _button(at, "Reconcile stripe now").click().run()
        assert not at.exception
        # the sandbox's 40 events are not in the inbox; the 5 seeded stripe events are not at the
        # source; one seeded event is stuck and one dead
        assert at.success[0].value == (
            "stripe: succeeded; 40 records scanned; found: dead 1, missing 40, orphaned 5, "
            "stuck 1; resolved 0"
        )
        # the page reran after the run: its table already lists the run just made
        assert "dashboard" in list(at.dataframe[0].value["trigger"])
        with engine.connect() as conn:
            runs = conn.execute(
                select(RECON_RUNS.c.trigger, RECON_RUNS.c.records_scanned).where(
                    RECON_RUNS.c.trigger == "dashboard"
                )
            ).all()
        assert [tuple(r) for r in runs] == [("dashboard", 40)]
        assert _audit(engine) == [("anonymous@localhost", "reconcile", None)]
    finally:
        server.stop()
        engine.dispose()


def test_a_viewer_is_offered_sign_in(viewer: Dash) -> None:
    at = viewer.app()
    assert [b.label for b in at.sidebar.button] == ["Sign in"]
    assert at.sidebar.caption[0].value == "Read-only: sign in to act."


def test_empty_and_unreachable_databases_show_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(
        "HOOKLEDGER_CONFIG", str(write_config(empty, f"sqlite:///{empty / 'new.db'}"))
    )
    for page in (None, "discrepancies", "events", "dead_letters", "runs"):
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        if page:
            at.switch_page(f"views/{page}.py")
            at.run()
        assert not at.exception
        assert "The database is empty" in at.error[0].value
    gone = tmp_path / "gone"
    gone.mkdir()
    url = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2"
    monkeypatch.setenv("HOOKLEDGER_CONFIG", str(write_config(gone, url)))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception
    assert at.error[0].value.startswith("Cannot reach the database")
    # a good primary and a read replica that is empty, then unreachable: said, not a traceback
    good = tmp_path / "good"
    good.mkdir()
    primary = make_engine(f"sqlite:///{good / 'primary.db'}")
    upgrade(primary)
    primary.dispose()
    for i, (replica, said) in enumerate(
        (
            (
                f"sqlite:///{good / 'replica.db'}",
                "The read replica ([dashboard] database_url) is empty",
            ),
            (url, "Cannot reach the read replica ([dashboard] database_url)"),
        )
    ):
        (good / str(i)).mkdir()  # a config file of its own: the app caches what it read by path
        cfg = write_config(
            good / str(i),
            f"sqlite:///{good / 'primary.db'}",
            dashboard_extra=f'database_url = "{replica}"',
        )
        monkeypatch.setenv("HOOKLEDGER_CONFIG", str(cfg))
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        assert not at.exception
        assert at.error[0].value.startswith(said), at.error[0].value


def test_what_was_written_a_moment_ago_is_counted(dash: Dash) -> None:
    """The range ends at "now" rounded up (for the cache), never down: fresh rows are in it."""
    from sqlalchemy import insert

    from reconciler.storage.models import DELIVERIES
    from reconciler.storage.types import utcnow

    with dash.engine.begin() as conn:
        conn.execute(
            insert(DELIVERIES).values(
                source="github", received_at=utcnow(), outcome="rejected", status_code=401
            )
        )
    at = dash.app()
    at.selectbox(key="ov_range").set_value("Last hour").run()
    github = dict(zip(KPI_LABELS, [m.value for m in at.metric][8:16], strict=True))
    assert github["Rejected"] == "1"


def test_a_reconcile_now_that_fails_is_audited_too(engine: Engine, db_url: str) -> None:
    from reconciler.errors import HookledgerError
    from reconciler.ops import operator_actions as actions
    from reconciler.storage.models import AUDIT_LOG
    from tests.conftest import make_settings

    settings = make_settings(
        db_url,
        sources=[
            {
                "name": "stripe",
                "kind": "stripe",
                "base_url": "http://127.0.0.1:9",
                "api_key_env": "T_UNSET_KEY",
            }
        ],
    )
    with pytest.raises(HookledgerError, match="T_UNSET_KEY"):
        actions.reconcile_now(engine, settings, "stripe", actor="night-shift")
    with engine.connect() as conn:
        entry = conn.execute(
            select(AUDIT_LOG.c.actor, AUDIT_LOG.c.action, AUDIT_LOG.c.detail)
        ).one()
    assert (entry.actor, entry.action, entry.detail["status"]) == (
        "night-shift",
        "reconcile",
        "failed",
    )
    assert "T_UNSET_KEY" in entry.detail["error"]


def _seed_conflict(engine: Engine) -> None:
    import json as _json

    from connectors.providers.stripe.signature import parse_stripe
    from reconciler.inbox.store import IncomingEvent, store_items

    def body(status: str, email: str) -> bytes:
        obj = {"id": "in_c", "object": "invoice", "status": status, "email": email}
        event = {
            "id": "evt_conflict",
            "type": "invoice.paid",
            "created": 1,
            "data": {"object": obj},
        }
        return _json.dumps(event).encode()

    items = [
        IncomingEvent("stripe", parse_stripe({}, b), b, {}, datetime.now(UTC))
        for b in (body("paid", "ann@example.com"), body("refunded", "bob@example.com"))
    ]
    with engine.begin() as conn:
        assert [o.outcome.value for o in store_items(conn, items)] == ["accepted", "conflict"]


def test_a_conflict_shows_both_bodies_masked_and_applies_the_later_one(dash: Dash) -> None:
    _seed_conflict(dash.engine)
    at = dash.app("discrepancies")
    at.multiselect(key="d_kinds").set_value(["conflict"]).run()
    table = at.dataframe[-1].value
    assert set(table["field"]) == {"data.object.status", "data.object.email"}
    assert "ann@example.com" not in str(table.to_dict())  # PII masked in the list
    did = int(table[table["field"] == "data.object.status"]["id"].iloc[0])
    at.number_input(key="d_id").set_value(did).run()
    assert not at.exception, [e.value for e in at.exception]
    diff = next(c.value for c in at.code if c.value.startswith("--- stored"))
    assert '-      "status": "paid"' in diff and '+      "status": "refunded"' in diff
    assert "bob@example.com" not in diff and "<masked>" in diff
    assert at.radio(key="d_action_kind").options == [
        "keep stored version",
        "apply later delivery",
        "ignore",
    ]
    at.radio(key="d_action_kind").set_value("apply later delivery")
    at.text_input(key="d_reason").input("the refund went through")
    at.checkbox(key="d_confirm").check()
    _button(at, "Apply").click().run()
    assert [s.value for s in at.success] == [
        "stripe evt_conflict: pending → pending with the later delivery's body (same event id); "
        "2 conflicting fields resolved"
    ]
    assert _audit(dash.engine) == [
        ("anonymous@localhost", "conflict.apply_later", "the refund went through")
    ]
    with dash.engine.connect() as conn:
        stored = conn.execute(
            select(INBOX_EVENTS.c.body).where(INBOX_EVENTS.c.event_id == "evt_conflict")
        ).scalar_one()
    assert b"refunded" in stored


def _outbox(engine: Engine) -> dict[str, int]:
    """Two messages to crm: one sent (an attempt a minute ago), one dead with a customer's e-mail."""
    now = datetime.now(UTC)
    ids = {}
    with engine.begin() as conn:
        for key, status, payload in (
            ("crm-sent", "sent", {"order": 1}),
            ("crm-dead", "dead", {"order": 2, "email": "jane@example.com"}),
        ):
            add_message(conn, "crm", payload, key=key, correlation_id="corr-1")
            ids[key] = conn.execute(select(OUTBOX.c.id).where(OUTBOX.c.key == key)).scalar_one()
            conn.execute(
                update(OUTBOX)
                .where(OUTBOX.c.key == key)
                .values(
                    status=status,
                    attempts=1,
                    last_error="crm answered HTTP 400: bad" if status == "dead" else None,
                )
            )
            conn.execute(
                insert(OUTBOX_ATTEMPTS).values(
                    message_id=ids[key],
                    target="crm",
                    attempt=1,
                    publisher="p",
                    started_at=now - timedelta(minutes=1),
                    finished_at=now - timedelta(minutes=1),
                    outcome=status,
                    status_code=202 if status == "sent" else 400,
                )
            )
    return ids


def test_the_outbox_page_shows_targets_messages_and_replays_the_dead(dash: Dash) -> None:
    ids = _outbox(dash.engine)
    at = dash.app("outbox")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {
        "Pending now": "0",
        "Oldest pending": "-",
        "Sent in range": "1",
        "Failed attempts in range": "0",
        "Dead now": "1",
        "Success rate in range": "50.0%",
    }
    assert list(at.dataframe[0].value["key"]) == ["crm-dead", "crm-sent"]
    at.selectbox(key="ob_pick").set_value(ids["crm-dead"]).run()
    shown = "\n".join(c.value for c in at.code)
    assert '"email": "<masked>"' in shown and "jane@example.com" not in shown
    assert any("crm answered HTTP 400" in e.value for e in at.error)
    _button(at, "← All messages").click().run()
    at.multiselect(key="ob_dead_pick").set_value([ids["crm-dead"]]).run()
    at.text_input(key="ob_reason").input("crm fixed")
    at.checkbox(key="ob_confirm").check()
    _button(at, "Replay").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("1 outbox message back to pending" in s.value for s in at.success)
    with dash.engine.connect() as conn:
        status = conn.execute(
            select(OUTBOX.c.status).where(OUTBOX.c.id == ids["crm-dead"])
        ).scalar_one()
        audit = conn.execute(
            select(AUDIT_LOG.c.action, AUDIT_LOG.c.actor, AUDIT_LOG.c.reason)
        ).all()
    assert status == "pending" and ("outbox.replay", "anonymous@localhost", "crm fixed") in [
        tuple(a) for a in audit
    ]


def test_the_outbox_preselects_nothing_and_a_message_permalink_retries_that_message_only(
    dash: Dash,
) -> None:
    ids = _outbox(dash.engine)
    with dash.engine.begin() as conn:  # a second dead message that must stay dead
        add_message(conn, "crm", {"order": 3}, key="crm-dead-2")
        conn.execute(update(OUTBOX).where(OUTBOX.c.key == "crm-dead-2").values(status="dead"))
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("views/outbox.py")
    at.query_params["message"] = str(ids["crm-dead"])
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # the permalink opened the message: its detail and its own retry
    assert any(f"Message #{ids['crm-dead']}" in s.value for s in at.subheader)
    at.text_input(key="ob_one_reason").input("crm fixed that order")
    at.checkbox(key="ob_one_confirm").check()
    _button(at, "Retry this message").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("1 outbox message back to pending" in s.value for s in at.success)
    with dash.engine.connect() as conn:
        statuses = dict(conn.execute(select(OUTBOX.c.key, OUTBOX.c.status)).all())
    assert statuses == {"crm-sent": "sent", "crm-dead": "pending", "crm-dead-2": "dead"}
    assert at.query_params["message"] == str(ids["crm-dead"])
    _button(at, "← All messages").click().run()
    assert at.multiselect(key="ob_dead_pick").value == []  # nothing chosen for the operator


@pytest.mark.parametrize("raw", ["999999", "0", "-3", "abc", "9" * 30])
def test_an_outbox_permalink_to_no_message_says_so(dash: Dash, raw: str) -> None:
    _outbox(dash.engine)
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("views/outbox.py")
    at.query_params["message"] = raw
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    # a well-formed id that does not exist is named; anything else is ignored, as every URL value
    assert errors == (["no outbox message 999999"] if raw == "999999" else [])


def test_a_failed_reconcile_now_is_on_the_runs_page_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    engine = make_engine(url)
    try:
        upgrade(engine)
        extra = 'base_url = "http://127.0.0.1:9"\napi_key_env = "T_UNSET_DASH_KEY"\n'
        monkeypatch.setenv(
            "HOOKLEDGER_CONFIG", str(write_config(tmp_path, url, stripe_extra=extra))
        )
        at = Dash(engine, seed(engine)).app("runs")
        _button(at, "Reconcile stripe now").click().run()
        assert not at.exception, [e.value for e in at.exception]
        assert any("T_UNSET_DASH_KEY" in e.value for e in at.error)
        # the page reran: the failed run is in its table, not only in the database
        table = at.dataframe[0].value
        failed = table[table["trigger"] == "dashboard"]
        assert list(failed["status"]) == ["failed"]
    finally:
        engine.dispose()


@pytest.mark.parametrize("page", ["overview", "events", "outbox", "runs"])
def test_every_page_says_when_sign_in_is_off(dash: Dash, page: str) -> None:
    at = dash.app(page)
    banner = [w.value for w in at.warning if "Sign-in is off" in w.value]
    assert banner == [
        "Sign-in is off: everyone who reaches this port can act. Actions are audited as "
        "`anonymous@localhost`; turn on `[dashboard.auth]` to know who acted."
    ]


def test_no_sign_in_banner_when_sign_in_is_on(viewer: Dash) -> None:
    at = viewer.app("overview")
    assert not [w for w in at.warning if "Sign-in is off" in w.value]


def test_the_events_page_follows_a_correlation_id_to_outgoing_messages(dash: Dash) -> None:
    _outbox(dash.engine)
    at = dash.app("events")
    at.text_input(key="e_query").input("corr-1").run()
    assert not at.exception
    assert any("Outgoing messages" in m.value and "corr-1" in m.value for m in at.markdown)
    assert sorted(at.dataframe[0].value["key"]) == ["crm-dead", "crm-sent"]


def test_pages_read_the_replica_and_actions_write_the_primary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from reconciler.storage.models import DELIVERIES

    primary_url = f"sqlite:///{tmp_path / 'primary.db'}"
    primary = make_engine(primary_url)
    upgrade(primary)
    expected = seed(primary)
    primary.dispose()
    with (
        sqlite3.connect(tmp_path / "primary.db") as source,
        sqlite3.connect(tmp_path / "replica.db") as copy,
    ):
        source.backup(copy)  # the replica, as of now
    primary = make_engine(primary_url)
    with primary.begin() as conn:  # the primary moves on: its deliveries pruned, say
        conn.execute(DELIVERIES.delete())
    replica_url = f"sqlite:///{tmp_path / 'replica.db'}"
    extra = f'database_url = "{replica_url}"'
    monkeypatch.setenv(
        "HOOKLEDGER_CONFIG", str(write_config(tmp_path, primary_url, dashboard_extra=extra))
    )
    dash = Dash(primary, expected)
    at = dash.app()
    got = dict(zip(KPI_LABELS, [m.value for m in at.metric][:8], strict=True))
    assert got["Accepted"] == f"{expected.accepted['stripe']:,}"  # read on the replica
    at = dash.app("discrepancies")
    at.multiselect(key="d_kinds").set_value(["diverged"]).run()
    did = int(at.dataframe[-1].value["id"].iloc[0])
    at.number_input(key="d_id").set_value(did).run()
    at.radio(key="d_action_kind").set_value("ignore")
    at.text_input(key="d_reason").input("handled on the replica's view")
    at.checkbox(key="d_confirm").check()
    _button(at, "Apply").click().run()
    assert [s.value for s in at.success] == [f"discrepancy {did} marked ignored"]
    replica = make_engine(replica_url)
    try:
        assert _audit(primary) == [
            ("anonymous@localhost", "discrepancy.ignored", "handled on the replica's view")
        ]
        assert _audit(replica) == []  # written where writes go
    finally:
        replica.dispose()
        primary.dispose()


def test_permalinks_are_absolute_with_public_url_and_say_so_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    engine = make_engine(url)
    upgrade(engine)
    seed(engine)
    engine.dispose()
    for extra, expected in (
        ("", "`/events?source=stripe&event_id=evt_2` (relative: set `[dashboard] public_url`"),
        (
            'public_url = "https://ops.example.com/hookledger"',
            "`https://ops.example.com/hookledger/events?source=stripe&event_id=evt_2` ·",
        ),
    ):
        folder = tmp_path / ("public" if extra else "relative")  # (settings are cached by path)
        folder.mkdir()
        config = write_config(folder, url, dashboard_extra=extra)
        monkeypatch.setenv("HOOKLEDGER_CONFIG", str(config))
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["source"] = "stripe"
        at.query_params["event_id"] = "evt_2"
        at.run()
        at.switch_page("views/events.py")
        at.query_params["source"] = "stripe"
        at.query_params["event_id"] = "evt_2"
        at.run()
        captions = " ".join(c.value for c in at.caption)
        assert expected in captions, captions


TWILIO_SOURCE = '\n[[sources]]\nname = "sms"\nkind = "twilio"\nsigning_secret_env = "T_TWILIO"\n'


@pytest.mark.parametrize("shown", [False, True])
def test_the_event_view_masks_twilio_personal_fields_and_payment_data_in_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shown: bool
) -> None:
    from urllib.parse import urlencode

    from connectors.parsing import ParsedEvent
    from reconciler.inbox.store import IncomingEvent, store_items

    url = f"sqlite:///{tmp_path / 'dash.db'}"
    engine = make_engine(url)
    upgrade(engine)
    extra = "show_personal_fields = true" if shown else ""
    config = write_config(tmp_path, url, stripe_extra=TWILIO_SOURCE, dashboard_extra=extra)
    monkeypatch.setenv("HOOKLEDGER_CONFIG", str(config))
    sms = {
        "MessageSid": "SM1",
        "SmsStatus": "received",
        "From": "+15005550001",
        "To": "+15005550006",
    }
    sms["Body"] = "door code 1234"
    item = IncomingEvent(
        "sms",
        ParsedEvent("SM1", event_type="message.received", object_type="message", object_id="SM1"),
        urlencode(sms).encode(),
        {"x-note": "card 4111.1111.1111.1111", "user-agent": "TwilioProxy/1.1"},
        datetime.now(UTC),
        "application/x-www-form-urlencoded",
    )
    with engine.begin() as conn:
        store_items(conn, [item])
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("views/events.py")
    at.query_params["source"], at.query_params["event_id"] = "sms", "SM1"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    payload = at.code[0].value
    for key in ("From", "To", "Body"):
        assert (sms[key] in payload) is shown, (key, payload)
    assert "received" in payload
    headers = at.json[0].value
    assert "4111" not in headers and "<masked>" in headers and "TwilioProxy/1.1" in headers
    engine.dispose()
