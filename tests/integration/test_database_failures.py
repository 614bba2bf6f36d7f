"""The one boundary for database errors (reconciler.storage.failures), on SQLite and PostgreSQL:
what each failure becomes, that a handler's statements keep SQLAlchemy's classes, and that the
pool and the group committer still behave as they did before the boundary."""

from __future__ import annotations

import asyncio
import logging
import pickle
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, create_engine, insert, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError

from connectors.parsing import ParsedEvent
from reconciler.errors import DatabaseError, HookledgerError
from reconciler.inbox.committer import GroupCommitter
from reconciler.inbox.handlers import Event, HandlerRegistry
from reconciler.inbox.store import IncomingEvent
from reconciler.inbox.worker import Worker
from reconciler.storage.engine import make_engine
from reconciler.storage.failures import (
    HANDLER_STATEMENTS,
    DatabaseBusy,
    DatabaseRefused,
    DatabaseUnavailable,
    translate_errors,
)
from tests.business import business_tables, credits
from tests.conftest import make_settings
from tests.integration.test_worker import put, row

SECRET = "s3cr3t-pass"


def _closed_port_url() -> str:
    return f"postgresql+psycopg://hookledger:{SECRET}@127.0.0.1:9/nowhere"


def test_a_database_that_cannot_be_reached_is_unavailable_in_one_line() -> None:
    engine = make_engine(_closed_port_url(), connect_timeout=2)
    with pytest.raises(DatabaseUnavailable) as raised:
        engine.connect()
    exc = raised.value
    message = str(exc)
    assert message.startswith("database postgresql+psycopg://hookledger:***@127.0.0.1:9/nowhere: ")
    assert "\n" not in message and SECRET not in message and SECRET not in repr(exc)
    # hookledger's error, still the SQLAlchemy class it replaces, chained to the driver's error
    assert isinstance(exc, DatabaseError) and isinstance(exc, HookledgerError)
    assert isinstance(exc, OperationalError)
    assert exc.__cause__ is not None and type(exc.__cause__).__module__.startswith("psycopg")


def test_a_sqlite_file_that_cannot_be_opened_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("")
    engine = create_engine(f"sqlite:///{tmp_path / 'plain' / 'hookledger.db'}")
    translate_errors(engine)  # (make_engine would try to create the folder first)
    with pytest.raises(DatabaseUnavailable, match="unable to open database file"):
        engine.connect()


def test_a_refused_statement_names_the_database_and_never_its_parameters(engine: Engine) -> None:
    with business_tables(engine):
        with engine.begin() as conn:
            conn.execute(insert(credits).values(invoice_id="in_1", amount=1, event_id="evt_1"))
        with pytest.raises(DatabaseRefused) as raised, engine.begin() as conn:
            conn.execute(insert(credits).values(invoice_id="in_1", amount=2, event_id=SECRET))
    exc = raised.value
    masked = engine.url.render_as_string(hide_password=True)
    assert str(exc) == f"database {masked}: {exc.reason}"
    assert "\n" not in str(exc) and "[SQL" not in str(exc)
    assert SECRET not in str(exc) and SECRET not in repr(exc) and exc.params is None
    assert isinstance(exc, DBAPIError) and not isinstance(exc, IntegrityError)
    assert "unique" in exc.reason.lower() or "duplicate" in exc.reason.lower()


def test_a_handlers_statements_keep_sqlalchemys_refusals(engine: Engine) -> None:
    with business_tables(engine), engine.connect() as conn:
        conn.execution_options(**{HANDLER_STATEMENTS: True})
        with conn.begin():
            conn.execute(insert(credits).values(invoice_id="in_1", amount=1, event_id="evt_1"))
            with pytest.raises(IntegrityError), conn.begin_nested():
                conn.execute(insert(credits).values(invoice_id="in_1", amount=1, event_id="e"))


def test_a_handler_catching_integrity_error_is_processed_by_the_worker(
    engine: Engine, db_url: str
) -> None:
    """The everyday idempotent insert: ``except IntegrityError`` still catches the duplicate."""
    caught: list[str] = []

    def credit_once(event: Event, conn: Connection) -> None:
        try:
            with conn.begin_nested():
                conn.execute(insert(credits).values(invoice_id="in_1", amount=5, event_id="x"))
        except IntegrityError:
            caught.append(event.event_id)

    registry = HandlerRegistry()
    registry.register("stripe", "*", credit_once)
    with business_tables(engine):
        put(engine, "evt_first")
        put(engine, "evt_second")
        Worker(engine, make_settings(db_url), registry).drain()
        assert row(engine, "evt_first").status == "processed"
        assert row(engine, "evt_second").status == "processed"
        assert len(caught) == 1
        with engine.connect() as conn:
            assert len(conn.execute(select(credits)).all()) == 1


def test_a_held_sqlite_lock_is_busy(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'b.db'}", connect_args={"timeout": 0.1})
    translate_errors(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    holder = engine.connect()
    try:
        holder.exec_driver_sql("BEGIN IMMEDIATE")
        with (
            pytest.raises(DatabaseBusy, match="database is locked") as raised,
            engine.connect() as other,
        ):
            other.exec_driver_sql("BEGIN IMMEDIATE")
        assert isinstance(raised.value, OperationalError)  # retried as before: transient
    finally:
        holder.rollback()
        holder.close()


@pytest.fixture
def postgres(pg_url: str) -> Iterator[Engine]:
    engine = make_engine(pg_url)
    yield engine
    engine.dispose()


def _terminate(engine: Engine, pid: int) -> None:
    with engine.connect() as admin:
        admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})


def test_a_connection_that_broke_is_unavailable_and_the_pool_recovers(postgres: Engine) -> None:
    with postgres.connect() as conn:
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        _terminate(postgres, pid)
        with pytest.raises(DatabaseUnavailable) as raised:
            conn.execute(text("SELECT 1"))
    assert raised.value.connection_invalidated
    with postgres.connect() as conn:  # the broken connection was not handed out again
        assert conn.execute(text("SELECT 1")).scalar_one() == 1


def test_a_pooled_connection_that_died_idle_is_replaced_silently(
    postgres: Engine, pg_url: str
) -> None:
    """pool_pre_ping's probe of a dead connection is not turned into an error."""
    with postgres.connect() as conn:
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
    admin = make_engine(pg_url)  # (not the pool under test, which would hand out the victim)
    try:
        _terminate(admin, pid)
    finally:
        admin.dispose()
    for _ in range(3):
        with postgres.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1


def test_a_handler_sees_a_broken_connection_as_unavailable(postgres: Engine) -> None:
    with postgres.connect() as conn:
        conn.execution_options(**{HANDLER_STATEMENTS: True})
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        _terminate(postgres, pid)
        with pytest.raises(DatabaseUnavailable) as raised:
            conn.execute(text("SELECT 1"))
    assert isinstance(raised.value, OperationalError)


def test_the_translated_errors_survive_pickling() -> None:
    engine = make_engine(_closed_port_url(), connect_timeout=2)
    with pytest.raises(DatabaseUnavailable) as raised:
        engine.connect()
    again = pickle.loads(pickle.dumps(raised.value))
    assert type(again) is DatabaseUnavailable and str(again) == str(raised.value)
    assert again.reason == raised.value.reason


def _event(event_id: str) -> IncomingEvent:
    return IncomingEvent(
        source="stripe",
        parsed=ParsedEvent(
            event_id=event_id, event_type="invoice.paid", object_id="in_1", object_type="invoice"
        ),
        body=b"{}",
        headers={},
        received_at=datetime.now(UTC),
    )


def test_a_batch_to_an_unavailable_database_fails_at_once_not_item_by_item(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = make_engine(_closed_port_url(), connect_timeout=2)
    committer = GroupCommitter(engine, max_batch=50)

    async def run() -> list[Any]:
        await committer.start()
        try:
            items = [_event(f"evt_{i}") for i in range(10)]
            return await asyncio.gather(
                *(committer.submit(item) for item in items), return_exceptions=True
            )
        finally:
            await committer.stop()

    with caplog.at_level(logging.WARNING, logger="reconciler.inbox.committer"):
        results = asyncio.run(run())
    assert all(isinstance(r, DatabaseUnavailable) for r in results)
    assert "one by one" not in caplog.text  # each would have been tried again, in vain


def test_every_translated_error_is_an_sqlalchemy_error() -> None:
    """Sites that only survive trouble (metrics, heartbeats, the dashboard) catch SQLAlchemyError."""
    for kind in (DatabaseUnavailable, DatabaseBusy, DatabaseRefused):
        assert issubclass(kind, SQLAlchemyError) and issubclass(kind, DatabaseError)
