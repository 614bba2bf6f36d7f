"""inbox_events.account: the Stripe Connect account an event belongs to

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 17:25:00

A source read as one connected account (``account``) lists only that account's events: the orphan
pass compares only inbox events of that account. Rows stored before this have none (NULL).
"""

import sqlalchemy as sa
from alembic import op


revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("inbox_events") as batch:
        batch.add_column(sa.Column("account", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("inbox_events") as batch:
        batch.drop_column("account")
