"""recon_seen.newest_epoch: the orphan window is bounded above by the newest record a scan listed

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04 18:00:00

A scan's orphan anti-join judged every inbox event from its oldest listed record on, also time the
scan never read (a rerun that listed one old record judged the whole present). Rows of a scan under
way before this migration have no value: such a scan's window is bounded by its other rows.
"""

import sqlalchemy as sa
from alembic import op


revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("recon_seen", schema=None) as batch_op:
        batch_op.add_column(sa.Column("newest_epoch", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("recon_seen", schema=None) as batch_op:
        batch_op.drop_column("newest_epoch")
