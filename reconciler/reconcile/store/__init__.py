"""A scan's storage, one store type per database; the only place that tells them apart.

:func:`open_store` picks the store of a connection's database (``sqlite.SqliteStore``,
``postgres.PostgresStore``; callers type it as :class:`interface.ScanStore`);
:func:`business_connection` and :func:`read_only_session` give the business tables' reads their
database's protection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime

from sqlalchemy import Connection, Engine

from reconciler.reconcile.store import postgres, sqlite
from reconciler.reconcile.store.interface import ScanStore, Window
from reconciler.reconcile.store.passes import CLOCK_SKEW, Passes, listed_scope
from reconciler.storage.dialect import is_postgresql
from reconciler.storage.engine import SQLITE_BEGIN_OPTION

__all__ = [
    "CLOCK_SKEW",
    "Passes",
    "ScanStore",
    "Window",
    "business_connection",
    "listed_scope",
    "open_store",
    "read_only_session",
    "reader",
]


def _is_postgres(bind: Connection | Engine) -> bool:
    return is_postgresql(bind)


def check_ready(engine: Engine) -> None:
    """A clear error, before anything is written, where the database cannot run a scan."""
    if not _is_postgres(engine):
        sqlite.require_json()


def open_store(
    conn: Connection, source: str, run_id: str, now: datetime, *, dry_run: bool
) -> ScanStore:
    """The scan store of this connection's database."""
    if _is_postgres(conn):
        return postgres.PostgresStore(conn, source, run_id, now, dry_run=dry_run)
    return sqlite.SqliteStore(conn, source, run_id, now, dry_run=dry_run)


@contextlib.contextmanager
def read_only_session(conn: Connection, timeout_seconds: float) -> Iterator[Connection]:
    """PostgreSQL: this session read-only, each statement within ``timeout_seconds`` (SQLite
    business databases of their own are opened with ``query_only``)."""
    if not _is_postgres(conn):
        yield conn
        return
    with postgres.read_only(conn, timeout_seconds):
        yield conn


@contextlib.contextmanager
def business_connection(
    store: ScanStore, business_engine: Engine, timeout_seconds: float
) -> Iterator[Connection]:
    """The business tables' connection for a scan: on SQLite the scan's own when they share its
    database (SQLite never waits on itself), else one of their own, read-only."""
    if business_engine is store.scan.conn.engine and not _is_postgres(business_engine):
        yield store.scan.conn
        return
    with reader(business_engine, timeout_seconds) as biz:
        yield biz


@contextlib.contextmanager
def reader(engine: Engine, timeout_seconds: float) -> Iterator[Connection]:
    """A connection of its own that only reads, beside the scan's writer. PostgreSQL: read-only,
    each statement within ``timeout_seconds`` and on its own (no BEGIN and ROLLBACK round trips
    around a read, which cost more than the read). SQLite: its transactions begin deferred, so they
    read the last commit (WAL) instead of queueing for the writer's lock."""
    with engine.connect() as conn:
        if not _is_postgres(conn):
            yield conn.execution_options(**{SQLITE_BEGIN_OPTION: "DEFERRED"})
            return
        with read_only_session(
            conn.execution_options(isolation_level="AUTOCOMMIT"), timeout_seconds
        ):
            yield conn
