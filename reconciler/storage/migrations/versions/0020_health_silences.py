"""health_silences: a health-strip warning an operator silenced, by whom and until when

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 09:00:00

Issue 46: a warning an operator cannot act on (no scheduler in a demo, a quiet source) can be
silenced for a while; who did it, why and until when are kept here and in the audit log.
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "health_silences",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("signal", sa.String(128), nullable=False),
        sa.Column("silenced_by", sa.String(128), nullable=False),
        sa.Column("reason", sa.String(500), nullable=False),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("until", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_health_silences"),
    )
    op.create_index("ix_health_silences_signal_until", "health_silences", ["signal", "until"])


def downgrade() -> None:
    op.drop_index("ix_health_silences_signal_until", table_name="health_silences")
    op.drop_table("health_silences")
