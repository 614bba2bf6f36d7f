"""hookledger_issues, hookledger_issue_members, hookledger_issue_marks: failures grouped as issues

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06 09:00:00

Issue 46: dead events, failed outbox deliveries, failed reconciliation runs and open discrepancies
are grouped by kind, source, type and a normalised error signature (one row per group, unique by
that key), each failure a member of one group (unique by the failing row, so a refresh that reads a
row twice counts it once), and each kind read from where the previous refresh stopped.
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

TIME = sa.DateTime(timezone=True)
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "hookledger_issues",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("source", sa.String(255), nullable=False),
        sa.Column("event_type", sa.String(255), nullable=False),
        sa.Column("signature", sa.String(255), nullable=False),
        sa.Column("sample_error", sa.Text(), nullable=True),
        sa.Column("first_seen", TIME, nullable=False),
        sa.Column("last_seen", TIME, nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("acknowledged_by", sa.String(128), nullable=True),
        sa.Column("acknowledged_at", TIME, nullable=True),
        sa.Column("resolved_by", sa.String(128), nullable=True),
        sa.Column("resolved_at", TIME, nullable=True),
        sa.Column("resolved_reason", sa.Text(), nullable=True),
        sa.Column("reopened_count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_hookledger_issues"),
        sa.UniqueConstraint(
            "kind",
            "source",
            "event_type",
            "signature",
            name="uq_hookledger_issues_kind_source_event_type_signature",
        ),
    )
    op.create_index(
        "ix_hookledger_issues_status_last_seen", "hookledger_issues", ["status", "last_seen"]
    )
    op.create_table(
        "hookledger_issue_members",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("issue_id", BIG_ID, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("ref", sa.BigInteger(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("item", sa.String(400), nullable=False),
        sa.Column("at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_hookledger_issue_members"),
        sa.ForeignKeyConstraint(
            ["issue_id"],
            ["hookledger_issues.id"],
            name="fk_hookledger_issue_members_issue_id_hookledger_issues",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint("kind", "ref", name="uq_hookledger_issue_members_kind_ref"),
    )
    op.create_index(
        "ix_hookledger_issue_members_issue_id_at",
        "hookledger_issue_members",
        ["issue_id", "at"],
    )
    op.create_table(
        "hookledger_issue_marks",
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("upto", TIME, nullable=False),
        sa.PrimaryKeyConstraint("kind", name="pk_hookledger_issue_marks"),
    )


def downgrade() -> None:
    op.drop_table("hookledger_issue_marks")
    op.drop_table("hookledger_issue_members")
    op.drop_table("hookledger_issues")
