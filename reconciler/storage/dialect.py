"""Dialect-specific statement builders (INSERT ... ON CONFLICT exists on both, under two names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Table, bindparam
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError


def driver_execute(conn: Connection, sql: str, params: Any = ()) -> list[Any]:
    """Run one statement on the DBAPI connection under ``conn`` (so in its transaction) and return
    its rows (none for a write).

    For the statements a scan runs once per source page: SQLAlchemy's execute path costs ~45 us a
    statement here (its execution context, result object and events), more than many of them take.
    Errors are raised wrapped as by ``Connection.exec_driver_sql`` (``sqlalchemy.exc.OperationalError``
    and so on); ``echo`` logging and cursor events do not see these statements."""
    dbapi = conn.dialect.loaded_dbapi
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description is not None else []
    except dbapi.Error as exc:
        raise DBAPIError.instance(sql, params, exc, dbapi.Error, dialect=conn.dialect) from exc
    finally:
        cursor.close()


def insert_for(conn: Connection, table: Table) -> Any:
    """An ``insert()`` that supports ``on_conflict_do_nothing`` / ``on_conflict_do_update``."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    if conn.dialect.name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database dialect {conn.dialect.name!r}")


class PrecompiledWrite:
    """An ``INSERT ... ON CONFLICT`` compiled once per dialect and row shape, then run through the driver.

    SQLAlchemy never caches the dialects' INSERT constructs (sqlalchemy/sqlalchemy#10445), so a hot write
    recompiles on every call. This keeps SQLAlchemy's SQL and its bind processing (the same
    ``TypeDecorator``/JSON/Enum conversions a normal execute applies) and skips only the recompilation.
    Use it for statements without RETURNING whose structure never changes.
    """

    def __init__(self, build: Callable[[Connection], Any]) -> None:
        self._build = build
        self._cache: dict[
            tuple[str, tuple[str, ...]],
            tuple[str, tuple[str, ...] | None, dict[str, Any], dict[str, Any]],
        ] = {}

    def _compiled(
        self, conn: Connection, keys: tuple[str, ...]
    ) -> tuple[str, tuple[str, ...] | None, dict[str, Any], dict[str, Any]]:
        cache_key = (conn.dialect.name, keys)
        if cache_key not in self._cache:
            compiled = self._build(conn).compile(dialect=conn.dialect, column_keys=list(keys))
            positions = tuple(compiled.positiontup) if compiled.positiontup else None
            processors = dict(compiled._bind_processors)
            self._cache[cache_key] = (
                compiled.string,
                positions,
                compiled.construct_params(_check=False),  # the statement's own literals
                processors,
            )
        return self._cache[cache_key]

    def execute(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        keys = tuple(rows[0])
        sql, positions, defaults, processors = self._compiled(conn, keys)
        out: list[Any] = []
        for row in rows:
            values = {**defaults, **row}
            for name, proc in processors.items():
                if name in values:
                    values[name] = proc(values[name])
            out.append(tuple(values[n] for n in positions) if positions is not None else values)
        if len(out) == 1:
            driver_execute(conn, sql, out[0])  # the hot case: one row (a cursor, a page's finding)
        else:
            conn.exec_driver_sql(sql, out)


class PrecompiledStatement:
    """Any statement, compiled once per dialect and run through the driver with its named bind
    parameters (SQLAlchemy's bind processing applied, as a normal execute would; result columns get
    none: use it for plain values)."""

    def __init__(self, build: Callable[[Connection], Any]) -> None:
        self._build = build
        self._cache: dict[
            str, tuple[str, tuple[str, ...] | None, dict[str, Any], dict[str, Any]]
        ] = {}

    def execute(self, conn: Connection, params: Mapping[str, Any]) -> list[Any]:
        name = conn.dialect.name
        if name not in self._cache:
            compiled = self._build(conn).compile(dialect=conn.dialect)
            positions = tuple(compiled.positiontup) if compiled.positiontup else None
            self._cache[name] = (
                compiled.string,
                positions,
                compiled.construct_params(_check=False),  # the statement's own literals
                dict(compiled._bind_processors),
            )
        sql, positions, defaults, processors = self._cache[name]
        values = {**defaults, **params}
        for key, proc in processors.items():
            values[key] = proc(values[key])
        return driver_execute(
            conn, sql, tuple(values[k] for k in positions) if positions else values
        )


class PrecompiledMultiRowWrite(PrecompiledWrite):
    """The same, sending a batch as ONE multi-row ``VALUES`` statement (psycopg's executemany runs one
    statement per row). Compiled once per dialect, row shape and row count; every bind parameter carries
    its column's type explicitly (left untyped, only the first row's values would get the column's bind
    processing, e.g. timestamps stored in another text format on SQLite)."""

    CHUNK = 500

    def __init__(self, build: Callable[[Connection], Any]) -> None:
        super().__init__(build)
        self._multi: dict[
            tuple[str, tuple[str, ...], int], tuple[str, tuple[str, ...] | None, dict[str, Any]]
        ] = {}

    def _compiled_rows(
        self, conn: Connection, keys: tuple[str, ...], n: int
    ) -> tuple[str, tuple[str, ...] | None, dict[str, Any]]:
        cache_key = (conn.dialect.name, keys, n)
        if cache_key not in self._multi:
            stmt = self._build(conn)
            table = stmt.table
            rows = [
                {k: bindparam(f"{k}__{i}", type_=table.c[k].type) for k in keys} for i in range(n)
            ]
            compiled = stmt.values(rows).compile(dialect=conn.dialect)
            positions = tuple(compiled.positiontup) if compiled.positiontup else None
            self._multi[cache_key] = (compiled.string, positions, dict(compiled._bind_processors))
        return self._multi[cache_key]

    def execute(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        for start in range(0, len(rows), self.CHUNK):
            chunk = rows[start : start + self.CHUNK]
            keys = tuple(chunk[0])
            sql, positions, processors = self._compiled_rows(conn, keys, len(chunk))
            values = {f"{k}__{i}": row[k] for i, row in enumerate(chunk) for k in keys}
            for name, proc in processors.items():
                values[name] = proc(values[name])
            conn.exec_driver_sql(
                sql, tuple(values[n] for n in positions) if positions is not None else values
            )
