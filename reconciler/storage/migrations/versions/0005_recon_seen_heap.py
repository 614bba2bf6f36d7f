"""recon_seen: an append-only heap (no index on the event id), occurred time as epoch seconds

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 16:00:00

The reconciler wrote every listed event id into a primary-key index on (source, event_id). Ids come in
the source's order, random for that index, so each page dirtied about a hundred index leaves that the
commit then wrote out: half of a run's time. The orphan anti-join, the only reader, runs once per scan;
it needs no permanent index (SQLite builds an automatic one, PostgreSQL hashes). Rows of a scan in
progress are carried over, so a scan interrupted before the upgrade still resumes with what it saw.
"""

from alembic import op
import sqlalchemy as sa


revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _epoch(column: str) -> str:
    if op.get_bind().dialect.name == "sqlite":
        # stored as 'YYYY-MM-DD HH:MM:SS.ffffff': whole seconds, plus the fraction read as a number
        return f"CAST(strftime('%s', {column}) AS REAL) + CAST(substr({column}, 20) AS REAL)"
    return f"extract(epoch from {column})"


def _set_aside(new_name: str) -> None:
    op.rename_table("recon_seen", new_name)
    if op.get_bind().dialect.name == "postgresql":  # constraint (index) names are per schema there
        op.execute(f"ALTER TABLE {new_name} RENAME CONSTRAINT pk_recon_seen TO pk_{new_name}")


def upgrade() -> None:
    _set_aside("recon_seen_0004")
    op.create_table(
        "recon_seen",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=False),
        sa.Column("occurred_epoch", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recon_seen")),
    )
    op.execute(
        "INSERT INTO recon_seen (source, event_id, occurred_epoch) "
        f"SELECT source, event_id, {_epoch('occurred_at')} FROM recon_seen_0004"
    )
    op.drop_table("recon_seen_0004")


def downgrade() -> None:
    _set_aside("recon_seen_0005")
    op.create_table(
        "recon_seen",
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("source", "event_id", name=op.f("pk_recon_seen")),
    )
    if op.get_bind().dialect.name == "sqlite":
        when = "strftime('%Y-%m-%d %H:%M:%f', occurred_epoch, 'unixepoch')"
    else:
        when = "to_timestamp(occurred_epoch)"
    op.execute(
        "INSERT INTO recon_seen (source, event_id, occurred_at) "
        f"SELECT source, event_id, min({when}) FROM recon_seen_0005 GROUP BY source, event_id"
    )
    op.drop_table("recon_seen_0005")
