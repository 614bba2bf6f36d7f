"""Content fingerprints: inbox_events.fingerprint; deliveries.body and deliveries.fingerprint

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 23:00:00

A redelivery of a stored event with other content is a conflict: the receiver compares fingerprints
and keeps the conflicting delivery's raw body in its ``deliveries`` row (other rows keep none).
Events stored before this have no fingerprint (NULL): it is computed from their body when a
redelivery needs it.
"""

import sqlalchemy as sa
from alembic import op


revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("inbox_events") as batch:
        batch.add_column(sa.Column("fingerprint", sa.String(64), nullable=True))
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("fingerprint", sa.String(64), nullable=True))
        batch.add_column(sa.Column("body", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("body")
        batch.drop_column("fingerprint")
    with op.batch_alter_table("inbox_events") as batch:
        batch.drop_column("fingerprint")
