"""The business tables a check points at: validated against the reflected schema, read in batches.

Table and column names come from config and are checked against the database before anything runs;
values are always bound parameters. ``where`` is an operator-written SQL filter, validated by running
it once with ``LIMIT 0``.

On PostgreSQL every business read runs in a ``READ ONLY`` transaction with a statement timeout
(``[business] statement_timeout_seconds``, see ``store.read_only_session``): a ``where`` that calls
``nextval()`` or ``pg_sleep()`` fails the check, naming it, instead of writing or stalling the run.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    MetaData,
    Select,
    Table,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.exc import NoSuchTableError, SQLAlchemyError

from reconciler.config import CheckSettings, SourceSettings
from reconciler.errors import ConfigError
from reconciler.reconcile.judge import BusinessFacts
from reconciler.reconcile.store import read_only_session
from reconciler.storage.dialect import name_of, one_of
from reconciler.storage.failures import DatabaseRefused, DatabaseUnavailable


@dataclass(frozen=True)
class BoundCheck:
    source: str
    index: int
    check: CheckSettings
    table: Table
    dialect: str  # the business database's (its look-up is built for it)

    @property
    def label(self) -> str:
        return f"source '{self.source}', check {self.index + 1} (table {self.check.table})"

    def scope(self) -> Any:
        return text(f"({self.check.where})") if self.check.where else None

    @functools.cached_property
    def rows_query(self) -> Select[Any]:
        """The rows of the ``keys`` given: built once, so SQLAlchemy's cache key of it is computed
        once too (a page's look-up otherwise spent more time building its query than running it)."""
        t, check = self.table, self.check
        columns = [t.c[check.key], *(t.c[c] for c in check.fields if c != check.key)]
        stmt = select(*columns).where(one_of(self.dialect, t.c[check.key], "keys"))
        if (scope := self.scope()) is not None:
            stmt = stmt.where(scope)
        return stmt


def _refused(check: BoundCheck, exc: DatabaseRefused) -> ConfigError:
    """A check's query the database refused: the check's fault (its ``where``, a timeout). (A
    database gone away is an outage, raised as it is, as the scan's own writes would report it.)"""
    return ConfigError(
        f"{check.label}: the business query failed: {exc.reason} (business checks run read-only, "
        "within [business] statement_timeout_seconds)"
    )


def bind_checks(
    engine: Engine, source: SourceSettings, timeout_seconds: float = 30.0
) -> list[BoundCheck]:
    """Reflect each check's table; a missing table or column is a ConfigError naming the check.

    Only the columns are reflected: a check reads nothing else, and a full reflection (indexes,
    constraints, comments) took a catalogue query each."""
    if not source.checks:
        return []  # (an inspector would connect for nothing)
    bound = []
    inspector = inspect(engine)
    for i, check in enumerate(source.checks):
        schema, _, name = check.table.rpartition(".")
        label = f"source '{source.name}', check {i + 1} (table {check.table})"
        try:
            columns = inspector.get_columns(name, schema=schema or None)
        except NoSuchTableError:
            raise ConfigError(
                f"{label}: the business database has no table '{check.table}'"
            ) from None
        table = Table(
            name,
            MetaData(),
            *(Column(c["name"], c["type"]) for c in columns),
            schema=schema or None,
        )
        wanted = [check.key, *check.fields] + ([check.unique_by] if check.unique_by else [])
        for column in wanted:
            if column not in table.c:
                raise ConfigError(f"{label}: table '{check.table}' has no column '{column}'")
        item = BoundCheck(source.name, i, check, table, name_of(engine))
        if check.where:
            try:
                with engine.connect() as conn, read_only_session(conn, timeout_seconds):
                    conn.execute(
                        select(func.count()).select_from(table).where(item.scope()).limit(0)
                    )
            except DatabaseUnavailable:
                raise
            except SQLAlchemyError as exc:  # refused, or not SQL at all (a bind with no value)
                raise ConfigError(
                    f"{label}: 'where' is not valid SQL here: {exc.__class__.__name__}"
                ) from None
        bound.append(item)
    return bound


def rows_by_key(
    conn: Connection, check: BoundCheck, keys: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """The business rows for these object ids, grouped by key (two rows for one object = duplicate)."""
    if not keys:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    try:
        result = conn.execute(check.rows_query, {"keys": [str(k) for k in keys]})
        for mapping in result.mappings():
            out.setdefault(str(mapping[check.check.key]), []).append(dict(mapping))
    except DatabaseRefused as exc:
        raise _refused(check, exc) from None
    return out


def duplicated(conn: Connection, check: BoundCheck, keys: Iterable[str]) -> dict[str, int]:
    """``unique_by`` values (object ids) held by more than one row, with their counts."""
    if not check.check.unique_by:
        return {}
    values = [str(k) for k in keys]
    if not values:
        return {}
    column = check.table.c[check.check.unique_by]
    stmt = (
        select(column, func.count())
        .where(column.in_(values))
        .group_by(column)
        .having(func.count() > 1)
    )
    if (scope := check.scope()) is not None:
        stmt = stmt.where(scope)
    try:
        return {str(value): int(count) for value, count in conn.execute(stmt)}
    except DatabaseRefused as exc:
        raise _refused(check, exc) from None


def facts(conn: Connection, check: BoundCheck, keys: Sequence[str]) -> BusinessFacts:
    """What the check's table holds for these object ids (the judge's business facts)."""
    if not keys:
        return BusinessFacts()
    return BusinessFacts(rows_by_key(conn, check, keys), duplicated(conn, check, keys))
