"""A database lease: at most one reconciliation per source at a time, even with two schedulers."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection, delete

from reconciler.storage.dialect import insert_for
from reconciler.storage.models import RECON_LEASES


def acquire(conn: Connection, source: str, owner: str, now: datetime, ttl: timedelta) -> bool:
    """Take the lease if it is free or expired: one statement, decided by the database."""
    stmt = insert_for(conn, RECON_LEASES).values(
        source=source, owner=owner, acquired_at=now, expires_at=now + ttl
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=["source"],
        set_={
            "owner": stmt.excluded.owner,
            "acquired_at": stmt.excluded.acquired_at,
            "expires_at": stmt.excluded.expires_at,
        },
        where=RECON_LEASES.c.expires_at < now,
    ).returning(RECON_LEASES.c.owner)
    row = conn.execute(stmt).first()
    return row is not None and row.owner == owner


def release(conn: Connection, source: str, owner: str) -> None:
    conn.execute(
        delete(RECON_LEASES).where(RECON_LEASES.c.source == source, RECON_LEASES.c.owner == owner)
    )
