"""Fixtures for tests whose handlers write business tables in the inbox's database or in a
separate one (issue 44's two ways): import them into a test module to use them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from reconciler.storage.engine import make_engine
from reconciler.storage.testing import scratch_postgres_schema
from tests.balances import metadata


@pytest.fixture(params=["inbox", "separate"])
def business_url(
    request: pytest.FixtureRequest, db_url: str, tmp_path: Path
) -> Iterator[str | None]:
    """None: the business tables live in the inbox's database; else a database of their own (a
    SQLite file, or a PostgreSQL schema of its own beside the inbox's)."""
    if request.param == "inbox":
        yield None
    elif db_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'business.db'}"
    else:
        base = os.environ["HOOKLEDGER_TEST_POSTGRES_URL"]
        with scratch_postgres_schema(base, prefix="hl_biz", revision=None) as url:
            yield url


@pytest.fixture
def business(engine: Engine, business_url: str | None) -> Iterator[Engine]:
    """The business database's engine, with tests/balances.py's table created."""
    target = make_engine(business_url) if business_url else engine
    metadata.drop_all(target)
    metadata.create_all(target)
    yield target
    metadata.drop_all(target)
    if target is not engine:
        target.dispose()


@pytest.fixture
def inbox_tables(engine: Engine) -> Iterator[Engine]:
    """tests/balances.py's table in the inbox's own database."""
    metadata.drop_all(engine)
    metadata.create_all(engine)
    yield engine
    metadata.drop_all(engine)
