"""pytest fixtures for handler tests: add ``pytest_plugins = ["hookledger.pytest_plugin"]`` to a
``conftest.py``.

- ``hookledger_business``: the business database the handlers write (``event.business``): a fresh
  SQLite file per test. Override it to create your tables, or to hand your own database.
- ``hookledger_handlers``: the handlers to run: those registered with ``@handler`` (import your
  handler modules in the test module). Override it to hand a ``HandlerRegistry`` of your own.
- ``hookledger_deliver``: runs the test once for each way production delivers (``once``,
  ``twice``, ``reversed``, ``shuffled``, ``replayed``: ``hookledger.testing.WAYS``); call it with the events in
  the order the provider made them, then assert the state every way must reach.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from reconciler.inbox.handlers import HandlerRegistry, default_registry
from reconciler.storage.engine import make_engine
from reconciler.testkit.deliveries import WAYS, Deliver, Deliveries


@pytest.fixture
def hookledger_business(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'business.db'}")
    yield engine
    engine.dispose()


@pytest.fixture
def hookledger_handlers() -> HandlerRegistry:
    return default_registry


@pytest.fixture(params=WAYS)
def hookledger_deliver(
    request: pytest.FixtureRequest,
    hookledger_business: Engine,
    hookledger_handlers: HandlerRegistry,
) -> Deliver:
    # a shuffle of its own for each test, the same on every run of it
    seed = zlib.crc32(request.node.nodeid.encode())
    return Deliver(Deliveries(hookledger_business, hookledger_handlers), request.param, seed)
