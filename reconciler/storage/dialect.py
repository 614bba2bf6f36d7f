"""Dialect-specific statement builders (INSERT ... ON CONFLICT exists on both, under two names)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def insert_for(conn: Connection, table: Table) -> Any:
    """An ``insert()`` that supports ``on_conflict_do_nothing`` / ``on_conflict_do_update``."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    if conn.dialect.name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database dialect {conn.dialect.name!r}")
