"""What every command shares: loading the config and opening the database."""

from __future__ import annotations

import argparse

from sqlalchemy import Engine

from reconciler.config import LoadedConfig, load_config
from reconciler.errors import ConfigError
from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import current_revision, head_revision


def load(args: argparse.Namespace) -> LoadedConfig:
    return load_config(getattr(args, "config", None))


def open_engine(loaded: LoadedConfig, *, require_schema: bool = True) -> Engine:
    settings = loaded.settings
    engine = make_engine(settings.database.url, echo=settings.database.echo)
    if require_schema:
        current = current_revision(engine)
        if current != head_revision(engine):
            engine.dispose()
            raise ConfigError(
                f"the database schema is at revision {current or 'none'}, not the current one: "
                "run 'hookledger init' first"
            )
    return engine
