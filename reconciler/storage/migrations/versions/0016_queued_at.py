"""inbox_events.queued_at and outbox.queued_at: when an event or message last became due

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 21:30:00

Queue age, `stuck` and the outbox's oldest-unsent age counted from the first receipt (or write),
so a replay of a 10-hour-old event showed a 10-hour-old queue a minute later. Existing rows became
due when they arrived: the new column starts as received_at (created_at for the outbox).
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# the same type as every other timestamp column (reconciler.storage.types.UTCDateTime's impl)
TIMESTAMP = sa.DateTime(timezone=True)


def _add(table: str, since: str) -> None:
    with op.batch_alter_table(table, schema=None) as batch_op:
        batch_op.add_column(sa.Column("queued_at", TIMESTAMP, nullable=True))
    op.execute(f"UPDATE {table} SET queued_at = {since}")
    with op.batch_alter_table(table, schema=None) as batch_op:
        batch_op.alter_column("queued_at", existing_type=TIMESTAMP, nullable=False)


def upgrade() -> None:
    _add("inbox_events", "received_at")
    _add("outbox", "created_at")


def downgrade() -> None:
    for table in ("inbox_events", "outbox"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("queued_at")
