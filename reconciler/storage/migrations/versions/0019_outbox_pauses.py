"""outbox_pauses and outbox.dead_at: a target paused by an operator; when a message went dead

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06 10:00:00

Issue 46: an operator pauses a target (its messages stay pending, no publisher claims them) and
resumes it; "recover since" counts the messages that died since a time, not those written since.
A dead message's death is the time its last attempt recorded, which the publisher also wrote into
next_attempt_at (a dead message is never due again): existing dead rows start from that.
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "outbox_pauses",
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("paused_by", sa.String(128), nullable=False),
        sa.Column("paused_at", TIME, nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("target", name="pk_outbox_pauses"),
    )
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.add_column(sa.Column("dead_at", TIME, nullable=True))
    op.execute("UPDATE outbox SET dead_at = next_attempt_at WHERE status = 'dead'")
    op.create_index("ix_outbox_target_dead_at", "outbox", ["target", "dead_at"])


def downgrade() -> None:
    op.drop_index("ix_outbox_target_dead_at", table_name="outbox")
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_column("dead_at")
    op.drop_table("outbox_pauses")
