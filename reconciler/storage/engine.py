"""Engine factory: the one place that knows dialect quirks.

SQLite: WAL, ``synchronous=NORMAL`` (durable across application crashes; a power loss may drop the last
transactions, the documented WAL trade-off), a busy timeout, foreign keys on, and ``BEGIN IMMEDIATE`` for
every transaction so that two writers queue on the busy timeout instead of failing with "database is
locked" when a read lock cannot be upgraded. ``wal_autocheckpoint`` is raised from 1,000 to 10,000
pages (a WAL of up to ~40 MB): checkpoints still run right after a commit, so the WAL restarts, but
index pages rewritten by many commits are copied back once (docs/benchmarks.md has the figures).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from reconciler.errors import ConfigError, DatabaseError
from reconciler.storage.failures import masked_url, translate_errors

SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_WAL_AUTOCHECKPOINT_PAGES = 10_000
# Execution option: "DEFERRED" makes a SQLite transaction take the write lock at its first write
# (the worker's handler transactions); every other transaction begins IMMEDIATE.
SQLITE_BEGIN_OPTION = "hookledger_sqlite_begin"


DEFAULT_CONNECT_TIMEOUT_SECONDS = 10.0


def make_engine(
    url: str,
    *,
    echo: bool = False,
    pool_size: int = 10,
    readonly: bool = False,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"[database] url is not a valid database URL: {exc}") from None
    # Statement parameters hold payloads, ids and personal data: errors and logs never show them.
    kwargs: dict[str, Any] = {"echo": echo, "future": True, "hide_parameters": True}
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            folder = Path(database).expanduser().parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DatabaseError(
                    f"database {masked_url(url)}: cannot create its folder {folder} ({exc.strerror})"
                ) from None
        kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
    else:
        kwargs.update(pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)
        if parsed.get_backend_name() == "postgresql":
            # A server that does not answer fails the connection after this long instead of hanging
            # the command (or the dashboard's page) on the operating system's TCP timeout.
            kwargs["connect_args"] = {"connect_timeout": max(1, round(connect_timeout))}
    try:
        engine = create_engine(parsed, **kwargs)
    except NoSuchModuleError as exc:
        raise ConfigError(f"[database] url: unsupported database driver ({exc})") from None
    except ModuleNotFoundError as exc:
        if exc.name == "psycopg2" and parsed.drivername == "postgresql":  # SQLAlchemy's default
            raise ConfigError(
                "[database] url: 'postgresql://' means the psycopg2 driver, which hookledger does "
                "not use: write 'postgresql+psycopg://' (psycopg 3, hookledger[postgres])"
            ) from None
        raise ConfigError(
            f"[database] url needs the Python package '{exc.name}': for PostgreSQL install "
            "hookledger[postgres]"
        ) from None
    translate_errors(engine)
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine, readonly=readonly)
    elif engine.dialect.name == "postgresql":
        _configure_postgres(engine)
    return engine


def _configure_postgres(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # psycopg prepares a statement after 5 runs, and PostgreSQL may then use a generic plan that
        # cannot see an IN list's values: for "source = $1 AND event_id IN (...)" it scanned every row
        # of the source through the (source, received_at) index, making each reconcile page O(table).
        # Plan each execution.
        dbapi_connection.execute("SET plan_cache_mode = force_custom_plan")
        dbapi_connection.commit()


def _configure_sqlite(engine: Engine, *, readonly: bool = False) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (the pysqlite driver would defer it).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        if readonly:  # someone else's database (business tables): never take its write lock
            cursor.execute("PRAGMA query_only=ON")
        cursor.execute(f"PRAGMA wal_autocheckpoint={SQLITE_WAL_AUTOCHECKPOINT_PAGES}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        if readonly:
            conn.exec_driver_sql("BEGIN")
            return
        mode = conn.get_execution_options().get(SQLITE_BEGIN_OPTION, "IMMEDIATE")
        conn.exec_driver_sql(f"BEGIN {'DEFERRED' if mode == 'DEFERRED' else 'IMMEDIATE'}")


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"
