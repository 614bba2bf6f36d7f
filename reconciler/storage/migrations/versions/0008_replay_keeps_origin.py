"""inbox_events.origin: a replayed event gets the origin of its first receipt back

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 16:20:00

Replay used to set ``origin = 'replay'``, which hid a replayed forged webhook from orphan detection
(it reads ``origin = 'webhook'``). Replays now keep the origin; this puts back the one each replay's
audit entry recorded as ``previous_origin`` (the earliest replay's), or ``webhook`` where none did.
"""

import json

import sqlalchemy as sa
from alembic import op


revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    events = sa.table(
        "inbox_events", sa.column("id"), sa.column("source"), sa.column("event_id"), sa.column("origin")
    )
    audit = sa.table(
        "audit_log",
        sa.column("id"),
        sa.column("action"),
        sa.column("source"),
        sa.column("event_id"),
        sa.column("detail", sa.JSON()),
    )
    replayed = conn.execute(
        sa.select(events.c.id, events.c.source, events.c.event_id).where(events.c.origin == "replay")
    ).all()
    for row in replayed:
        details = conn.execute(
            sa.select(audit.c.detail)
            .where(
                audit.c.action == "replay",
                audit.c.source == row.source,
                audit.c.event_id == row.event_id,
            )
            .order_by(audit.c.id)
        ).scalars()
        origin = "webhook"
        for detail in details:
            if isinstance(detail, str):
                detail = json.loads(detail)
            previous = (detail or {}).get("previous_origin")
            if previous in ("webhook", "backfill"):
                origin = previous
                break
        conn.execute(sa.update(events).where(events.c.id == row.id).values(origin=origin))


def downgrade() -> None:
    pass  # the restored origins are right under the old code too
