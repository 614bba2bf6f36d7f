"""notify_targets, notifications: what each [[notify]] target was told, so it is told once

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 17:00:00
"""

import sqlalchemy as sa
from alembic import op


revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

TIME = sa.DateTime(timezone=True)
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "notify_targets",
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("since", TIME, nullable=False),
        sa.PrimaryKeyConstraint("target", name="pk_notify_targets"),
    )
    op.create_table(
        "notifications",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(128), nullable=False),
        sa.Column("fact_at", TIME, nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", TIME, nullable=True),
        sa.Column("sent_at", TIME, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_notifications"),
        sa.UniqueConstraint("target", "key", name="uq_notifications_target_key"),
    )
    op.create_index(
        "ix_notifications_status_next_attempt_at", "notifications", ["status", "next_attempt_at"]
    )
    op.create_index(
        "ix_notifications_target_kind_subject_fact_at",
        "notifications",
        ["target", "kind", "subject", "fact_at"],
    )
    op.create_index("ix_notifications_target_sent_at", "notifications", ["target", "sent_at"])


def downgrade() -> None:
    op.drop_table("notifications")
    op.drop_table("notify_targets")
