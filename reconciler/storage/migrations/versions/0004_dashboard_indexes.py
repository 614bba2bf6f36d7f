"""dashboard: source on processing_attempts, covering indexes for time-bucketed Overview counts

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 13:00:00

Overview counts deliveries and processing outcomes per time bucket, source and outcome over a time
range for all sources. With the time column first and source and outcome in the index, those counts
are answered from the index alone; ``processing_attempts.source`` (copied from the event) avoids a
join per attempt.
"""

from alembic import op
import sqlalchemy as sa


revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("processing_attempts") as batch:
        batch.add_column(sa.Column("source", sa.String(length=64), nullable=False, server_default=""))
    op.execute(
        "UPDATE processing_attempts SET source = (SELECT e.source FROM inbox_events e "
        "WHERE e.id = processing_attempts.inbox_event_id)"
    )
    with op.batch_alter_table("processing_attempts") as batch:
        batch.alter_column("source", server_default=None)
        batch.drop_index("ix_processing_attempts_finished_at")
        batch.create_index(
            "ix_processing_attempts_finished_at_source_outcome",
            ["finished_at", "source", "outcome"],
        )
    op.drop_index("ix_deliveries_received_at", table_name="deliveries")
    op.create_index(
        "ix_deliveries_received_at_source_outcome",
        "deliveries",
        ["received_at", "source", "outcome"],
    )


def downgrade() -> None:
    op.drop_index("ix_deliveries_received_at_source_outcome", table_name="deliveries")
    op.create_index("ix_deliveries_received_at", "deliveries", ["received_at"])
    with op.batch_alter_table("processing_attempts") as batch:
        batch.drop_index("ix_processing_attempts_finished_at_source_outcome")
        batch.create_index("ix_processing_attempts_finished_at", ["finished_at"])
        batch.drop_column("source")
