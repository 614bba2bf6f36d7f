"""inbox: events, deliveries, processing attempts, audit log

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-30 10:22:56.205336
"""

from alembic import op
import sqlalchemy as sa


revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=64), nullable=True),
        sa.Column("event_id", sa.String(length=255), nullable=True),
        sa.Column("target", sa.String(length=255), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index("ix_audit_log_at", ["at"], unique=False)
        batch_op.create_index("ix_audit_log_source_event_id", ["source", "event_id"], unique=False)

    op.create_table(
        "deliveries",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=True),
        sa.Column("delivery_id", sa.String(length=255), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "outcome",
            sa.Enum(
                "accepted",
                "duplicate",
                "rejected",
                name="deliveryoutcome",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=512), nullable=True),
        sa.Column("remote_addr", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
    )
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index("ix_deliveries_received_at", ["received_at"], unique=False)
        batch_op.create_index("ix_deliveries_source_event_id", ["source", "event_id"], unique=False)
        batch_op.create_index(
            "ix_deliveries_source_received_at_outcome",
            ["source", "received_at", "outcome"],
            unique=False,
        )

    op.create_table(
        "inbox_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=False),
        sa.Column("event_type", sa.String(length=255), nullable=True),
        sa.Column("object_type", sa.String(length=128), nullable=True),
        sa.Column("object_id", sa.String(length=255), nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("api_version", sa.String(length=64), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("content_type", sa.String(length=255), nullable=True),
        sa.Column("headers", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "origin",
            sa.Enum(
                "webhook", "backfill", "replay", name="eventorigin", native_enum=False, length=16
            ),
            nullable=False,
        ),
        sa.Column(
            "status",
            sa.Enum(
                "pending",
                "processing",
                "processed",
                "failed",
                "dead",
                "ignored",
                name="eventstatus",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column(
            "error_class",
            sa.Enum("transient", "permanent", name="errorclass", native_enum=False, length=16),
            nullable=True,
        ),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_owner", sa.String(length=128), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("correlation_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_inbox_events")),
        sa.UniqueConstraint("source", "event_id", name=op.f("uq_inbox_events_source_event_id")),
    )
    with op.batch_alter_table("inbox_events", schema=None) as batch_op:
        batch_op.create_index("ix_inbox_events_correlation_id", ["correlation_id"], unique=False)
        batch_op.create_index(
            "ix_inbox_events_source_object", ["source", "object_type", "object_id"], unique=False
        )
        batch_op.create_index(
            "ix_inbox_events_source_received_at", ["source", "received_at"], unique=False
        )
        batch_op.create_index(
            "ix_inbox_events_status_next_attempt_at", ["status", "next_attempt_at"], unique=False
        )

    op.create_table(
        "processing_attempts",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column(
            "inbox_event_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=128), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "outcome",
            sa.Enum(
                "pending",
                "processing",
                "processed",
                "failed",
                "dead",
                "ignored",
                name="eventstatus",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column(
            "error_class",
            sa.Enum("transient", "permanent", name="errorclass", native_enum=False, length=16),
            nullable=True,
        ),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["inbox_event_id"],
            ["inbox_events.id"],
            name=op.f("fk_processing_attempts_inbox_event_id_inbox_events"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_processing_attempts")),
    )
    with op.batch_alter_table("processing_attempts", schema=None) as batch_op:
        batch_op.create_index("ix_processing_attempts_finished_at", ["finished_at"], unique=False)
        batch_op.create_index(
            "ix_processing_attempts_inbox_event_id", ["inbox_event_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("processing_attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_processing_attempts_inbox_event_id")
        batch_op.drop_index("ix_processing_attempts_finished_at")

    op.drop_table("processing_attempts")
    with op.batch_alter_table("inbox_events", schema=None) as batch_op:
        batch_op.drop_index("ix_inbox_events_status_next_attempt_at")
        batch_op.drop_index("ix_inbox_events_source_received_at")
        batch_op.drop_index("ix_inbox_events_source_object")
        batch_op.drop_index("ix_inbox_events_correlation_id")

    op.drop_table("inbox_events")
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_source_received_at_outcome")
        batch_op.drop_index("ix_deliveries_source_event_id")
        batch_op.drop_index("ix_deliveries_received_at")

    op.drop_table("deliveries")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index("ix_audit_log_source_event_id")
        batch_op.drop_index("ix_audit_log_at")

    op.drop_table("audit_log")
