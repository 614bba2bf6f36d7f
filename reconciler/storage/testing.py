"""Helpers for the project's own tests and benchmarks (and for users testing their handlers)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, text

from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade


@contextmanager
def scratch_postgres_schema(
    base_url: str, prefix: str = "hl_test", revision: str | None = "head"
) -> Iterator[str]:
    """A private schema on ``base_url``, migrated to ``revision`` (None: left empty); yields a URL
    whose search_path points at it.

    The schema is dropped afterwards, so runs never touch each other's (or anyone's) tables.
    """
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = make_engine(base_url)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = f"{base_url}{'&' if '?' in base_url else '?'}options=-csearch_path%3D{schema}"
        if revision is not None:
            engine = make_engine(url)
            try:
                upgrade(engine, revision)
            finally:
                engine.dispose()
        yield url
    finally:
        with admin.begin() as conn:
            _end_sessions_holding(conn, schema)
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


_HOLDERS = text(
    """
    SELECT DISTINCT a.pid, a.application_name, a.state, left(a.query, 120) AS query
    FROM pg_locks l
    JOIN pg_class c ON c.oid = l.relation
    JOIN pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE n.nspname = :schema AND l.pid <> pg_backend_pid()
    """
)


def _end_sessions_holding(conn: Connection, schema: str) -> None:
    """Ends the sessions still holding locks in the private schema, so dropping it cannot wait
    forever behind a connection a test leaked (it is named in the log, to be fixed)."""
    conn.execute(text("SET LOCAL lock_timeout = '30s'"))
    for holder in conn.execute(_HOLDERS, {"schema": schema}).mappings():
        logging.getLogger(__name__).warning(
            "ending session %s (%s, %s: %s) still holding locks in %s",
            holder["pid"],
            holder["application_name"] or "no application name",
            holder["state"],
            holder["query"],
            schema,
        )
        conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": holder["pid"]})
