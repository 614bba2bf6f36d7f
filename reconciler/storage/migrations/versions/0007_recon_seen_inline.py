"""recon_seen: a page's ids stay in the row (PostgreSQL)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30 23:30:00

A page's ids (100 Stripe ids: ~3.2 kB of JSON) are over PostgreSQL's default TOAST threshold (~2 kB):
each page's row was compressed (random ids barely compress) and moved out of line into the TOAST
table, an extra heap and index insert. ``toast_tuple_target`` at its maximum keeps rows up to a heap
page inline and uncompressed; larger ones (a page of thousands of ids) are still toasted
(docs/benchmarks.md has the figures). SQLite has no TOAST: nothing to do there.
"""

from alembic import op


revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TARGET = 8160  # the maximum with 8 kB pages


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE recon_seen SET (toast_tuple_target = {TARGET})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE recon_seen RESET (toast_tuple_target)")
