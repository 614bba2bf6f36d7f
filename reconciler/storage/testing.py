"""Helpers for the project's own tests and benchmarks (and for users testing their handlers)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text

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
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()
