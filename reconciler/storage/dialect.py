"""Dialect-specific statement builders (INSERT ... ON CONFLICT exists on both, under two names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, Table
from sqlalchemy.dialects import postgresql, sqlite


def insert_for(conn: Connection, table: Table) -> Any:
    """An ``insert()`` that supports ``on_conflict_do_nothing`` / ``on_conflict_do_update``."""
    return dialect_insert(conn.dialect.name, table)


def dialect_insert(dialect: str, table: Table) -> Any:
    """:func:`insert_for` by the dialect's name (for statements built once per dialect)."""
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database dialect {dialect!r}")


class CompiledOnce:
    """A dialect-specific statement compiled once per dialect and run with one row of values.

    SQLAlchemy does not cache the compiled form of the dialects' ``insert()`` (their ``ON
    CONFLICT`` state is not part of a cache key), so each execution compiles it again — for a
    one-row batch, more than the database's own work. This compiles it once, for the given
    ``keys``, and binds each value through its column type's processor as SQLAlchemy would.
    """

    def __init__(self, table: Table, keys: Sequence[str], build: Callable[[Any], Any]) -> None:
        self._table, self._keys, self._build = table, tuple(keys), build
        self._compiled: dict[str, tuple[Any, dict[str, Any]]] = {}

    def _for(self, dialect: Any) -> tuple[Any, dict[str, Any]]:
        found = self._compiled.get(dialect.name)
        if found is None:
            compiled = self._build(dialect_insert(dialect.name, self._table)).compile(
                dialect=dialect, column_keys=list(self._keys)
            )
            processors = {
                key: self._table.c[key].type.dialect_impl(dialect).bind_processor(dialect)
                for key in self._keys
            }
            found = (compiled, processors)
            self._compiled[dialect.name] = found
        return found

    def execute(self, conn: Connection, row: Mapping[str, Any]) -> list[Any]:
        """The statement's result rows for ``row`` (which holds exactly ``keys``)."""
        compiled, processors = self._for(conn.dialect)
        values = {}
        for key in self._keys:
            process = processors[key]
            values[key] = row[key] if process is None else process(row[key])
        params: Any = (
            tuple(values[name] for name in compiled.positiontup) if compiled.positional else values
        )
        return list(conn.exec_driver_sql(compiled.string, params))


def single_writer(engine: Engine | Connection) -> bool:
    """Whether the database has one writer at a time (SQLite): a transaction that writes holds
    everyone else's writes until it ends."""
    return engine.dialect.name == "sqlite"


# What the code above storage/ asks of a database, so that no module there compares dialect names
# (tests/unit/test_layers.py holds it).


def name_of(bind: Engine | Connection) -> str:
    """The dialect's name, for statements built and cached once per dialect."""
    return str(bind.dialect.name)


def is_postgresql(bind: Engine | Connection) -> bool:
    return bind.dialect.name == "postgresql"


def skips_locked_rows(bind: Engine | Connection) -> bool:
    """Whether ``SELECT … FOR UPDATE SKIP LOCKED`` lets concurrent claimers pass each other
    (PostgreSQL); SQLite's one writer makes a claim exclusive anyway."""
    return is_postgresql(bind)


def locks_rows(bind: Engine | Connection) -> bool:
    """Whether ``SELECT … FOR UPDATE`` locks the rows read (PostgreSQL; SQLite has no row locks)."""
    return is_postgresql(bind)


def one_of(dialect: str, column: Any, name: str) -> Any:
    """``column`` equal to one of the list bound as ``name``. PostgreSQL takes the list as one
    array parameter, so the statement's text (and the plan the driver prepares for it) is the same
    for any length; elsewhere an expanding ``IN``, which SQLAlchemy renders anew for each list."""
    from sqlalchemy import any_, bindparam

    if dialect == "postgresql":
        return column == any_(bindparam(name, type_=postgresql.ARRAY(column.type)))
    return column.in_(bindparam(name, expanding=True))


def greatest(dialect: Any, a: Any, b: Any) -> Any:
    """The larger of two SQL values: SQLite's two-argument ``max``, PostgreSQL's ``greatest``."""
    from sqlalchemy import func

    return func.max(a, b) if dialect.name == "sqlite" else func.greatest(a, b)


def sqlite_has_json() -> bool:
    """Whether the SQLite library this Python links (the one SQLAlchemy uses) has its JSON
    functions (``json_each``): built in from 3.38, and in most earlier builds as JSON1."""
    import sqlite3

    try:
        with sqlite3.connect(":memory:") as probe:
            probe.execute("SELECT value FROM json_each('[1]')").fetchall()
    except sqlite3.OperationalError:
        return False
    return True
