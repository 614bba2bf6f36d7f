"""The shipped migrations create exactly the schema the models describe, on both dialects."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine

from reconciler.storage.migrate import current_revision, head_revision, upgrade
from reconciler.storage.models import Base


def test_migrations_match_models_and_rerun_is_safe(engine: Engine) -> None:
    upgrade(engine)  # a second run is a no-op
    assert current_revision(engine) == head_revision(engine)
    with engine.connect() as conn:
        diff = compare_metadata(
            MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata
        )
    assert diff == []
