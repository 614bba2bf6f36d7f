"""orphan_watermarks: up to when each source's webhook events were checked for orphans

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 16:40:00

An incremental run that lists nothing new checked no inbox event for orphans: a forged event was
found only by a full rescan. Each run now checks every webhook event received since its source's
watermark (once past the grace period) and moves the watermark on.
"""

import sqlalchemy as sa
from alembic import op


revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "orphan_watermarks",
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("checked_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("source", name=op.f("pk_orphan_watermarks")),
    )


def downgrade() -> None:
    op.drop_table("orphan_watermarks")
