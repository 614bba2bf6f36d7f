"""scheduler_heartbeats; an index for listing every source's events newest first

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 16:00:00

The dashboard's health strip shows the scheduler's last heartbeat; the Events page pages through
all events by (received_at, id) without sorting the table.
"""

import sqlalchemy as sa
from alembic import op


revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "scheduler_heartbeats",
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("started_at", TIME, nullable=False),
        sa.Column("beat_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("owner", name="pk_scheduler_heartbeats"),
    )
    op.create_index("ix_inbox_events_received_at_id", "inbox_events", ["received_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_inbox_events_received_at_id", table_name="inbox_events")
    op.drop_table("scheduler_heartbeats")
