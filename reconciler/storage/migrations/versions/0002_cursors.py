"""cursors: each source's persisted connector position

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cursors",
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("position", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("source", name=op.f("pk_cursors")),
    )


def downgrade() -> None:
    op.drop_table("cursors")
