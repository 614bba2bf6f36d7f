"""The outgoing side: outbox, outbox_attempts, outbox_snapshots; idempotency_keys

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 04:00:00

A handler (or application code) writes outgoing calls into ``outbox`` in the transaction of the
change that caused them; a publisher sends them with their Idempotency-Key and records each attempt.
``idempotency_keys`` holds the keys clients send to the team's own API (the ASGI middleware).
"""

import sqlalchemy as sa
from alembic import op


revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIME = sa.DateTime(timezone=True)
OUTBOX_STATUS = sa.Enum(
    "pending", "sending", "sent", "failed", "dead",
    name="outboxstatus", native_enum=False, length=16, create_constraint=False,
)
ERROR_CLASS = sa.Enum(
    "transient", "permanent", "ambiguous",
    name="errorclass", native_enum=False, length=16, create_constraint=False,
)


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("content_type", sa.String(255), nullable=False),
        sa.Column("headers", sa.JSON(), nullable=False),
        sa.Column("status", OUTBOX_STATUS, nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", TIME, nullable=False),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        sa.Column("lease_expires_at", TIME, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("error_class", ERROR_CLASS, nullable=True),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("correlation_id", sa.String(64), nullable=False),
        sa.Column("source", sa.String(64), nullable=True),
        sa.Column("event_id", sa.String(255), nullable=True),
        sa.Column("object_key", sa.String(400), nullable=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("sent_at", TIME, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
        sa.UniqueConstraint("target", "key", name=op.f("uq_outbox_target_key")),
    )
    op.create_index("ix_outbox_status_next_attempt_at", "outbox", ["status", "next_attempt_at"])
    op.create_index("ix_outbox_target_object_key_id", "outbox", ["target", "object_key", "id"])
    op.create_index("ix_outbox_source_event_id", "outbox", ["source", "event_id"])
    op.create_index("ix_outbox_correlation_id", "outbox", ["correlation_id"])

    op.create_table(
        "outbox_attempts",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("message_id", ID, nullable=False),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("publisher", sa.String(128), nullable=False),
        sa.Column("started_at", TIME, nullable=False),
        sa.Column("finished_at", TIME, nullable=False),
        sa.Column("outcome", OUTBOX_STATUS, nullable=False),
        sa.Column("error_class", ERROR_CLASS, nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["outbox.id"],
            name=op.f("fk_outbox_attempts_message_id_outbox"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox_attempts")),
    )
    op.create_index("ix_outbox_attempts_message_id", "outbox_attempts", ["message_id"])
    op.create_index(
        "ix_outbox_attempts_finished_at_target_outcome",
        "outbox_attempts",
        ["finished_at", "target", "outcome"],
    )

    op.create_table(
        "outbox_snapshots",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("at", TIME, nullable=False),
        sa.Column("target", sa.String(64), nullable=False),
        sa.Column("unsent", sa.Integer(), nullable=False),
        sa.Column("oldest_age_seconds", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox_snapshots")),
    )
    op.create_index(
        "ix_outbox_snapshots_target_at_values",
        "outbox_snapshots",
        ["target", "at", "unsent", "oldest_age_seconds"],
    )

    op.create_table(
        "idempotency_keys",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("path", sa.String(2048), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "in_progress", "completed",
                name="idempotencystatus", native_enum=False, length=16, create_constraint=False,
            ),
            nullable=False,
        ),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_expires_at", TIME, nullable=True),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_headers", sa.JSON(), nullable=True),
        sa.Column("response_body", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.Column("completed_at", TIME, nullable=True),
        sa.Column("expires_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_keys")),
        sa.UniqueConstraint("owner", "key", name=op.f("uq_idempotency_keys_owner_key")),
    )
    op.create_index("ix_idempotency_keys_expires_at", "idempotency_keys", ["expires_at"])


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    op.drop_table("outbox_snapshots")
    op.drop_table("outbox_attempts")
    op.drop_table("outbox")
