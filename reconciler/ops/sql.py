"""Dialect-specific SQL pieces the read models share."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Table, cast, extract, func, literal_column
from sqlalchemy.engine import Dialect


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


def pin_index(stmt: Any, table: Table, index: str, dialect: Dialect) -> Any:
    """Pin SQLite to the index the query was designed for.

    SQLite's planner picks the wrong one easily when two indexes start with usable columns (a 24-hour
    count measured 545 ms with the wrong index, 5.5 ms with the right one). ``INDEXED BY`` also turns a
    dropped index into an error instead of a silent full scan. PostgreSQL's planner uses statistics.
    """
    if dialect.name == "sqlite":
        return stmt.with_hint(table, f"INDEXED BY {index}", dialect_name="sqlite")
    return stmt
