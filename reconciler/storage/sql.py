"""Dialect-specific SQL pieces the read models share."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Table, cast, extract, func, literal_column
from sqlalchemy.dialects.sqlite.base import SQLiteCompiler
from sqlalchemy.engine import Dialect


def _sqlite_from_hint(self: SQLiteCompiler, table: Any, text: str) -> str:
    return text


# SQLAlchemy renders ``with_hint`` table hints only for dialects that opt in (MySQL, Oracle, MSSQL);
# SQLite's ``INDEXED BY`` goes right after the table name, where a table hint is rendered, so opt in.
# Checked by tests/integration/test_dashboard_queries.py (the plans name the pinned index).
SQLiteCompiler.get_from_hint_text = _sqlite_from_hint  # type: ignore[method-assign,assignment]


def bucket_expr(col: Any, width: int, dialect: Dialect) -> ColumnElement[Any]:
    """Integer bucket index (Unix seconds // width) of a UTC datetime column.

    The width is inlined (not a bound parameter) so the same expression in SELECT and GROUP BY is
    identical text, which PostgreSQL requires.
    """
    w: ColumnElement[Any] = literal_column(str(int(width)))
    if dialect.name == "sqlite":
        # naive UTC ISO text; unixepoch() (SQLite 3.38+) parses it without strftime's formatting cost
        return func.unixepoch(col).op("/")(w)
    return cast(func.floor(extract("epoch", col)), BigInteger).op("/")(w)


def hour_expr(col: Any, dialect: Dialect) -> ColumnElement[Any]:
    """The UTC start of the hour of a datetime column, as the column's own stored form."""
    if dialect.name == "sqlite":
        # SQLAlchemy's SQLite datetime text ('YYYY-MM-DD HH:MM:SS.ffffff'), compared as text
        return func.strftime("%Y-%m-%d %H:00:00.000000", col)
    # epoch arithmetic: independent of the session's TimeZone (date_trunc on timestamptz is not)
    return func.to_timestamp(func.floor(extract("epoch", col) / 3600) * 3600)


def pin_index(stmt: Any, table: Table, index: str, dialect: Dialect) -> Any:
    """Pin SQLite to the index the query was designed for.

    SQLite's planner picks the wrong one easily when two indexes start with usable columns (a 24-hour
    count was a hundred times slower with the wrong one: docs/benchmarks.md). ``INDEXED BY`` also turns a
    dropped index into an error instead of a silent full scan. PostgreSQL's planner uses statistics.
    """
    if dialect.name == "sqlite":
        return stmt.with_hint(table, f"INDEXED BY {index}", dialect_name="sqlite")
    return stmt


LIKE_ESCAPE = "\\"


def like_literal(text: str) -> str:
    """``text`` for a LIKE pattern, its wildcards and the escape character matched as themselves
    (use with ``escape=LIKE_ESCAPE``); NULs dropped, as no stored text holds one."""
    cleaned = text.replace("\x00", "")
    return cleaned.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
