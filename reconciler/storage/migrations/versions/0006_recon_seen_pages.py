"""recon_seen: one row per source page, its event ids as a JSON array

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 21:00:00

A row per seen id cost ~100 heap and primary-key inserts a page (~25 kB of WAL a page on PostgreSQL)
and a delete of all of them when the scan completed; the anti-join, the only reader, unpacks arrays
as cheaply. Rows of a scan in progress are carried over (each id becomes a one-id array, and back),
so a scan interrupted before the upgrade or the downgrade still resumes with what it saw.
"""

import json

from alembic import op
import sqlalchemy as sa


revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
BATCH = 5000


def _set_aside(new_name: str) -> None:
    op.rename_table("recon_seen", new_name)
    if op.get_bind().dialect.name == "postgresql":  # constraint (index) names are per schema there
        op.execute(f"ALTER TABLE {new_name} RENAME CONSTRAINT pk_recon_seen TO pk_{new_name}")


def _copy(old: str, columns: str, convert, insert: str) -> None:
    """Stream ``old`` into the new table in batches (converted in Python: SQLite may lack JSON
    functions), then drop it."""
    bind = op.get_bind()
    last = 0
    while True:
        rows = bind.execute(
            sa.text(f"SELECT id, {columns} FROM {old} WHERE id > :last ORDER BY id LIMIT {BATCH}"),
            {"last": last},
        ).all()
        if not rows:
            break
        last = rows[-1][0]
        out = [new for row in rows for new in convert(row)]
        if out:
            bind.execute(sa.text(insert), out)
    op.drop_table(old)


def upgrade() -> None:
    _set_aside("recon_seen_0005")
    op.create_table(
        "recon_seen",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("event_ids", sa.Text(), nullable=False),
        sa.Column("occurred_epoch", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recon_seen")),
    )
    _copy(
        "recon_seen_0005",
        "source, event_id, occurred_epoch",
        lambda r: [{"s": r[1], "ids": json.dumps([r[2]]), "at": r[3]}],
        "INSERT INTO recon_seen (source, event_ids, occurred_epoch) VALUES (:s, :ids, :at)",
    )


def downgrade() -> None:
    _set_aside("recon_seen_0006")
    op.create_table(
        "recon_seen",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=False),
        sa.Column("occurred_epoch", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recon_seen")),
    )
    _copy(
        "recon_seen_0006",
        "source, event_ids, occurred_epoch",
        lambda r: [{"s": r[1], "id": i, "at": r[3]} for i in json.loads(r[2])],
        "INSERT INTO recon_seen (source, event_id, occurred_epoch) VALUES (:s, :id, :at)",
    )
