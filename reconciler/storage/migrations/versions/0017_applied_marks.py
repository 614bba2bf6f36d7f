"""hookledger_applied, inbox_events.replays and .hangs, and an index on lease_owner

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06 03:10:00

Issue 44: a handler's writes carry the event's applied mark (hookledger_applied, one row per source,
event id and replay round) in their own transaction, so a crash after the business commit or a second
runner cannot apply an event twice; a replay raises inbox_events.replays and so runs again. Attempts
that never came back (timed out, or their worker died) are counted in inbox_events.hangs; a started
attempt is told from a claimed, unstarted one by inbox_events.attempt_started_at. The worker's
lease keeper renews leases by owner: a partial index keeps that to the rows being processed.
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "hookledger_applied",
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(255), nullable=False),
        sa.Column("replay", sa.Integer(), nullable=False),
        sa.Column("applied_at", TIMESTAMP, nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(128), nullable=False),
        sa.PrimaryKeyConstraint("source", "event_id", "replay", name="pk_hookledger_applied"),
    )
    with op.batch_alter_table("inbox_events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("replays", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("hangs", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("attempt_started_at", TIMESTAMP, nullable=True))
    op.create_index(
        "ix_inbox_events_lease_owner",
        "inbox_events",
        ["lease_owner"],
        sqlite_where=sa.text("lease_owner IS NOT NULL"),
        postgresql_where=sa.text("lease_owner IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_inbox_events_lease_owner", table_name="inbox_events")
    with op.batch_alter_table("inbox_events", schema=None) as batch_op:
        batch_op.drop_column("attempt_started_at")
        batch_op.drop_column("hangs")
        batch_op.drop_column("replays")
    op.drop_table("hookledger_applied")
