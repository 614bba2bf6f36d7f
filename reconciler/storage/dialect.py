"""Dialect-specific statement builders (INSERT ... ON CONFLICT exists on both, under two names)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table
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
