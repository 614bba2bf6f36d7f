"""Run the Alembic migrations shipped in the package (``hookledger init``), and tell whether a
database is at the current revision.

Every command asks the latter before it opens a database, so it reads the revision with one query
and compares it with :data:`HEAD_REVISION`: importing Alembic (its DDL implementations, Mako,
Pygments) costs a command more than its start-up otherwise takes. A test holds the constant equal
to the migrations directory's head; Alembic itself is imported where it runs migrations.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, inspect, text

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
HEAD_REVISION = "0020"  # the newest file in migrations/versions (tests/unit/test_migrate.py)
VERSION_TABLE = "alembic_version"


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade the schema to ``revision``; safe to run repeatedly."""
    from alembic import command

    command.upgrade(alembic_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    """The database's schema revision (None: never initialised)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table(VERSION_TABLE):
            return None
        versions = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    return versions[0] if len(versions) == 1 else None if not versions else ",".join(versions)


def head_revision() -> str:
    """The revision this package's schema is at."""
    return HEAD_REVISION


def migrations_head() -> str | None:
    """The head revision as the migrations directory has it (Alembic reads every script)."""
    head: str | None = _scripts().get_current_head()
    return head


def known_revisions() -> list[str]:
    """Every revision this package ships, oldest first (Alembic reads every script)."""
    return [script.revision for script in reversed(list(_scripts().walk_revisions()))]


def _scripts() -> Any:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(cfg)
