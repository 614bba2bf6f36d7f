"""dashboard: hourly rollups, source on processing_attempts, covering indexes for Overview counts

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
    op.create_table(
        "hourly_counts",
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "hour", "source", "outcome", name=op.f("pk_hourly_counts")),
    )
    op.create_table(
        "rollup_marks",
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("upto", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("kind", name=op.f("pk_rollup_marks")),
    )
    op.create_table(
        "queue_snapshots_hourly",
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("max_unprocessed", sa.Integer(), nullable=False),
        sa.Column("max_oldest_age_seconds", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("source", "hour", name=op.f("pk_queue_snapshots_hourly")),
    )
    hour = (
        "strftime('%Y-%m-%d %H:00:00.000000', at)"
        if op.get_bind().dialect.name == "sqlite"
        else "to_timestamp(floor(extract(epoch from at) / 3600) * 3600)"
    )
    op.execute(
        "INSERT INTO queue_snapshots_hourly (source, hour, max_unprocessed, max_oldest_age_seconds) "
        f"SELECT source, {hour}, max(unprocessed), max(oldest_age_seconds) FROM queue_snapshots "
        f"GROUP BY source, {hour}"
    )
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
    op.drop_index("ix_queue_snapshots_source_at", table_name="queue_snapshots")
    op.create_index(
        "ix_queue_snapshots_source_at_values",
        "queue_snapshots",
        ["source", "at", "unprocessed", "oldest_age_seconds"],
    )
    op.drop_index("ix_deliveries_received_at", table_name="deliveries")
    op.create_index(
        "ix_deliveries_received_at_source_outcome",
        "deliveries",
        ["received_at", "source", "outcome"],
    )


def downgrade() -> None:
    op.drop_table("queue_snapshots_hourly")
    op.drop_table("rollup_marks")
    op.drop_table("hourly_counts")
    op.drop_index("ix_queue_snapshots_source_at_values", table_name="queue_snapshots")
    op.create_index("ix_queue_snapshots_source_at", "queue_snapshots", ["source", "at"])
    op.drop_index("ix_deliveries_received_at_source_outcome", table_name="deliveries")
    op.create_index("ix_deliveries_received_at", "deliveries", ["received_at"])
    with op.batch_alter_table("processing_attempts") as batch:
        batch.drop_index("ix_processing_attempts_finished_at_source_outcome")
        batch.create_index("ix_processing_attempts_finished_at", ["finished_at"])
        batch.drop_column("source")
