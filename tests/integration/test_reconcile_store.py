"""The scan store's guarantees over the shared scenario: page atomicity, chunked lookups, sessions
handed back to the pool as they were, the database going away, read-only business reads."""

from __future__ import annotations

import json
import statistics
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import (
    Engine,
    func,
    insert,
    select,
)

from reconciler.config import SourceSettings, parse_settings
from reconciler.reconcile.run import Reconciler
from reconciler.sources import build_connector
from reconciler.storage.models import DISCREPANCIES, RECON_RUNS, RECON_SEEN
from tests.scenario import (
    Scenario,
    stopping,
)


@pytest.mark.parametrize("delays", [[], [7.0], [5.0, 1.0], [9.0, 1.5, 4.0], [3.0, 8.0, 1.0, 2.0]])
def test_detection_delays_are_the_median_and_maximum_of_the_runs_own_first_findings(
    engine: Engine, delays: list[float]
) -> None:
    from reconciler.reconcile.store import open_store

    now = datetime.now(UTC)

    def row(key: str, delay: float | None, first: str = "run", last: str = "run") -> dict[str, Any]:
        return {
            "source": "stripe",
            "kind": "missing",
            "record_key": key,
            "field": "",
            "first_seen_at": now,
            "last_seen_at": now,
            "first_run_id": first,
            "last_run_id": last,
            "status": "open",
            "detection_delay_seconds": delay,
        }

    rows = [row(f"e{i}", d) for i, d in enumerate(delays)]
    rows += [
        row("no-delay", None),  # an object-only finding: no occurrence time
        row("older", 1e6, first="earlier"),  # found first by an earlier run, seen again
        row("other", -1e6, first="other", last="other"),
    ]
    with engine.begin() as conn:
        conn.execute(insert(DISCREPANCIES), rows)
    with engine.connect() as conn:
        got = open_store(conn, "stripe", "run", now, dry_run=True).passes.detection_delays()
    if not delays:
        assert got is None
    else:
        assert got == (pytest.approx(statistics.median(delays)), max(delays))


def test_pages_split_into_several_lookups_and_seen_rows_find_the_same(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.reconcile.store.scan import Scan

    monkeypatch.setattr(Scan, "lookup_chunk", 7)  # several statements and seen rows a page
    scenario.reconciler().run("stripe")
    assert scenario.found() == scenario.expected


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_sqlite_without_json_functions_is_refused_before_anything_is_written(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.errors import ConfigError
    from reconciler.reconcile.store import sqlite

    monkeypatch.setattr(sqlite, "SQLITE_JSON", False)
    with pytest.raises(ConfigError, match=r"no JSON functions \(json_each\)"):
        scenario.reconciler().run("stripe")
    with scenario.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(RECON_RUNS)).scalar_one() == 0
    assert scenario.found() == set()


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_postgres_a_scan_hands_the_pool_its_connections_back_as_they_were(
    scenario: Scenario,
) -> None:
    """The scan changes its session's settings for its pages; the pool gets every connection back
    with the engine's own (RESET would go to the server's defaults and drop force_custom_plan)."""

    def settings(c: Any) -> tuple[str, str, bool]:
        return (
            c.exec_driver_sql("SHOW synchronous_commit").scalar_one(),
            c.exec_driver_sql("SHOW plan_cache_mode").scalar_one(),
            c.connection.dbapi_connection.autocommit,
        )

    with scenario.engine.connect() as c:
        session = settings(c)
    assert session == ("on", "force_custom_plan", False)
    scenario.reconciler().run("stripe")
    pooled = [scenario.engine.connect() for _ in range(scenario.engine.pool.checkedin())]  # type: ignore[attr-defined]
    try:
        after = {settings(c) for c in pooled}
    finally:
        for c in pooled:
            c.close()
    assert after == {session}
    assert scenario.found() == scenario.expected


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize("how", ["dry_run", "interrupted"])
def test_postgres_a_scan_that_ends_early_hands_its_connection_back_as_it_was(
    scenario: Scenario, how: str
) -> None:
    from reconciler.errors import HookledgerError

    with scenario.engine.connect() as c:
        before = c.exec_driver_sql("SHOW plan_cache_mode").scalar_one()
    reconciler = scenario.reconciler()
    if how == "dry_run":
        reconciler.run("stripe", dry_run=True)
    else:
        with pytest.raises(HookledgerError, match="stopped after 1 page"):
            stopping(scenario, 1).run("stripe")
    pooled = [scenario.engine.connect() for _ in range(scenario.engine.pool.checkedin())]  # type: ignore[attr-defined]
    try:
        after = {
            (
                c.exec_driver_sql("SHOW plan_cache_mode").scalar_one(),
                c.exec_driver_sql("SHOW synchronous_commit").scalar_one(),
            )
            for c in pooled
        }
    finally:
        for c in pooled:
            c.close()
    assert after == {(before, "on")}


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_postgres_a_page_statement_that_fails_stores_none_of_what_it_carries(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's findings and cursor travel with the next page's seen ids and lookup: when that
    statement fails, none of it is stored; the run before it stays intact and a rerun completes it."""
    from reconciler.cursors import load_cursor
    from reconciler.errors import DatabaseError
    from reconciler.reconcile.store.postgres import PostgresStore

    real = PostgresStore.write
    cursors: list[dict[str, Any]] = []

    def write(self: PostgresStore, records: Any, findings: Any, cursor: Any) -> None:
        real(self, records, findings, cursor)
        cursors.append(dict(cursor))
        if len(cursors) == 2 and self.pending:  # page 2's: a kind too long for its column
            rows = json.loads(self.pending["findings"])
            bad = [*rows, {**rows[0], "kind": "k" * 40}] if rows else [{}]
            self.pending["findings"] = json.dumps(bad)

    def sequential(source: SourceSettings) -> Any:  # pages in order: page 2 has findings
        return build_connector(source.model_copy(update={"max_concurrency": 1}))

    monkeypatch.setattr(PostgresStore, "write", write)
    with pytest.raises(DatabaseError, match="value too long"):  # one line, not a traceback
        scenario.reconciler(connector_factory=sequential).run("stripe")
    with scenario.engine.connect() as conn:
        assert load_cursor(conn, "stripe") == cursors[0]  # page 1's, not page 2's
        seen_rows = conn.execute(select(func.count()).select_from(RECON_SEEN)).scalar_one()
        first_run = conn.execute(select(func.count()).select_from(DISCREPANCIES)).scalar_one()
    assert seen_rows == 2  # pages 1 and 2; page 3's went with the failed statement
    assert 0 < first_run < len(scenario.expected)
    monkeypatch.setattr(PostgresStore, "write", real)
    scenario.reconciler(connector_factory=sequential).run("stripe")
    assert scenario.found() == scenario.expected


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)  # SQLite does not go away
def test_postgres_the_database_going_away_mid_run_fails_the_run_in_one_line(
    scenario: Scenario, db_url: str
) -> None:
    """Every connection of the run is terminated after its second page: a DatabaseError naming the
    database and the driver's reason, the run marked failed, the cursor at the last committed page,
    and the next run resumes from it."""
    from reconciler.cursors import load_cursor
    from reconciler.errors import DatabaseError
    from reconciler.storage.engine import make_engine

    sep = "&" if "?" in db_url else "?"
    victim = make_engine(f"{db_url}{sep}application_name=hl_victim")
    pages = []

    def cut(source: str, scanned: Any) -> None:
        pages.append(scanned.records)
        if len(pages) == 2:
            with scenario.engine.begin() as conn:
                conn.exec_driver_sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'hl_victim'"
                )

    try:
        with pytest.raises(DatabaseError) as raised:
            Reconciler(victim, scenario.settings).run("stripe", progress=cut)
    finally:
        victim.dispose()
    message = str(raised.value)
    assert "\n" not in message and message.startswith("database postgresql+psycopg://")
    assert "terminating connection due to administrator command" in message
    with scenario.engine.connect() as conn:
        run = conn.execute(select(RECON_RUNS.c.status, RECON_RUNS.c.error)).one()
        cursor = load_cursor(conn, "stripe")
    assert str(run.status) == "failed" and "administrator command" in run.error
    # a committed page's position (sliced: the default concurrency reads slices), not the end
    assert cursor is not None and cursor.get("phase") in ("backfill", "sliced")
    resumed = scenario.reconciler().run("stripe")
    assert resumed.status == "succeeded" and 0 < resumed.records_scanned < 150
    assert scenario.found() == scenario.expected


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_postgres_a_business_read_on_a_dropped_connection_is_a_database_error(
    scenario: Scenario, db_url: str
) -> None:
    """Issue 34 (found by the test above under new timing): a check's read whose connection the
    server ended was reported as the check's fault (ConfigError); it is the database gone."""
    from reconciler.errors import ConfigError, DatabaseError
    from reconciler.reconcile.business import bind_checks, facts
    from reconciler.storage.engine import make_engine

    sep = "&" if "?" in db_url else "?"
    victim = make_engine(f"{db_url}{sep}application_name=hl_business_victim")
    source = scenario.settings.source("stripe")
    assert source is not None
    check = bind_checks(victim, source)[0]
    try:
        with victim.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
            with scenario.engine.begin() as admin:
                admin.exec_driver_sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'hl_business_victim'"
                )
            with pytest.raises(DatabaseError) as raised:
                facts(conn, check, ["in_1"])
    finally:
        victim.dispose()
    assert not isinstance(raised.value, ConfigError)
    message = str(raised.value)
    assert message.startswith("database postgresql+psycopg://") and "\n" not in message


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize(
    ("where", "reason"),
    [
        ("nextval('t_hl_seq') > 0", "read-only transaction"),
        ("pg_sleep(5) IS NOT NULL", "statement timeout"),
    ],
)
def test_postgres_business_checks_run_read_only_within_a_statement_timeout(
    scenario: Scenario, where: str, reason: str
) -> None:
    import time

    from reconciler.errors import ConfigError

    with scenario.engine.begin() as conn:
        conn.exec_driver_sql("CREATE SEQUENCE IF NOT EXISTS t_hl_seq")
    data = scenario.settings.model_dump(exclude_unset=True)
    data["sources"][0]["checks"][0]["where"] = where
    data["business"] = {"statement_timeout_seconds": 0.5}
    settings = parse_settings(data, "<test>")
    t = time.monotonic()
    try:
        with pytest.raises(ConfigError, match=rf"check 1 \(table t_invoices\).*{reason}"):
            Reconciler(scenario.engine, settings).run("stripe")
        assert time.monotonic() - t < 10
        with scenario.engine.connect() as conn:
            advanced = conn.exec_driver_sql("SELECT last_value, is_called FROM t_hl_seq").one()
            run = conn.execute(select(RECON_RUNS.c.status, RECON_RUNS.c.error)).one()
        assert advanced.is_called is False  # nextval never ran
        assert str(run.status) == "failed" and reason in run.error
        # the pool's sessions are read-write again: a normal run succeeds
        assert scenario.reconciler().run("stripe").status == "succeeded"
    finally:
        with scenario.engine.begin() as conn:
            conn.exec_driver_sql("DROP SEQUENCE IF EXISTS t_hl_seq")
