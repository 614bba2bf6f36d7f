"""reconciliation: runs, discrepancies, seen ids, leases, queue snapshots

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 11:25:30.616813
"""

from alembic import op
import sqlalchemy as sa


revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "discrepancies",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column(
            "kind",
            sa.Enum(
                "missing",
                "duplicate",
                "diverged",
                "unapplied",
                "orphaned",
                "stuck",
                "dead",
                name="discrepancykind",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("record_key", sa.String(length=400), nullable=False),
        sa.Column("field", sa.String(length=128), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=True),
        sa.Column("event_type", sa.String(length=255), nullable=True),
        sa.Column("object_type", sa.String(length=128), nullable=True),
        sa.Column("object_id", sa.String(length=255), nullable=True),
        sa.Column("source_value", sa.Text(), nullable=True),
        sa.Column("local_value", sa.Text(), nullable=True),
        sa.Column("amount", sa.BigInteger(), nullable=True),
        sa.Column("currency", sa.String(length=8), nullable=True),
        sa.Column("cause", sa.String(length=32), nullable=True),
        sa.Column("recover_by", sa.DateTime(timezone=True), nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("detection_delay_seconds", sa.Float(), nullable=True),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_run_id", sa.String(length=36), nullable=False),
        sa.Column("last_run_id", sa.String(length=36), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "open",
                "resolved",
                "ignored",
                name="discrepancystatus",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("resolution", sa.Text(), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_discrepancies")),
        sa.UniqueConstraint(
            "source",
            "kind",
            "record_key",
            "field",
            name=op.f("uq_discrepancies_source_kind_record_key_field"),
        ),
    )
    with op.batch_alter_table("discrepancies", schema=None) as batch_op:
        batch_op.create_index("ix_discrepancies_last_run_id", ["last_run_id"], unique=False)
        batch_op.create_index("ix_discrepancies_last_seen_at", ["last_seen_at"], unique=False)
        batch_op.create_index(
            "ix_discrepancies_status_source_kind", ["status", "source", "kind"], unique=False
        )

    op.create_table(
        "queue_snapshots",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("unprocessed", sa.Integer(), nullable=False),
        sa.Column("oldest_age_seconds", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_snapshots")),
    )
    with op.batch_alter_table("queue_snapshots", schema=None) as batch_op:
        batch_op.create_index("ix_queue_snapshots_source_at", ["source", "at"], unique=False)

    op.create_table(
        "recon_leases",
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("source", name=op.f("pk_recon_leases")),
    )
    op.create_table(
        "recon_runs",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "running",
                "succeeded",
                "failed",
                "skipped",
                name="runstatus",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=True),
        sa.Column("window_end", sa.DateTime(timezone=True), nullable=True),
        sa.Column("records_scanned", sa.Integer(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recon_runs")),
        sa.UniqueConstraint("run_id", name=op.f("uq_recon_runs_run_id")),
    )
    with op.batch_alter_table("recon_runs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_recon_runs_source_started_at", ["source", "started_at"], unique=False
        )

    op.create_table(
        "recon_seen",
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("source", "event_id", name=op.f("pk_recon_seen")),
    )


def downgrade() -> None:
    op.drop_table("recon_seen")
    with op.batch_alter_table("recon_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_recon_runs_source_started_at")

    op.drop_table("recon_runs")
    op.drop_table("recon_leases")
    with op.batch_alter_table("queue_snapshots", schema=None) as batch_op:
        batch_op.drop_index("ix_queue_snapshots_source_at")

    op.drop_table("queue_snapshots")
    with op.batch_alter_table("discrepancies", schema=None) as batch_op:
        batch_op.drop_index("ix_discrepancies_status_source_kind")
        batch_op.drop_index("ix_discrepancies_last_seen_at")
        batch_op.drop_index("ix_discrepancies_last_run_id")

    op.drop_table("discrepancies")
