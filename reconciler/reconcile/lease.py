"""A database lease: at most one reconciliation per source at a time, even with two schedulers.

The running run renews its lease every few seconds (:class:`Heartbeat`), so a lease is short
(``[reconcile] lease_seconds``) and a run that died with its process frees the source once its lease
has gone that long without renewal; the next run resumes the dead run's scan from its cursor.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, delete, select, update
from sqlalchemy.exc import SQLAlchemyError

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


@dataclass(frozen=True)
class Holder:
    owner: str
    acquired_at: datetime
    expires_at: datetime

    def describe(self) -> str:
        return (
            f"held by {self.owner} since {self.acquired_at.isoformat(timespec='seconds')} "
            f"(renewed until {self.expires_at.isoformat(timespec='seconds')})"
        )


def holder(conn: Connection, source: str) -> Holder | None:
    row = conn.execute(
        select(RECON_LEASES.c.owner, RECON_LEASES.c.acquired_at, RECON_LEASES.c.expires_at).where(
            RECON_LEASES.c.source == source
        )
    ).first()
    return None if row is None else Holder(row.owner, row.acquired_at, row.expires_at)


def renew(conn: Connection, source: str, owner: str, now: datetime, ttl: timedelta) -> bool:
    """Push the lease's expiry out; False when this owner no longer holds it."""
    result = conn.execute(
        update(RECON_LEASES)
        .where(RECON_LEASES.c.source == source, RECON_LEASES.c.owner == owner)
        .values(expires_at=now + ttl)
    )
    return result.rowcount == 1


log = logging.getLogger(__name__)


class Heartbeat:
    """Renews a held lease on a thread of its own until stopped (a third of the lease at most)."""

    def __init__(
        self,
        engine: Engine,
        source: str,
        owner: str,
        ttl: timedelta,
        clock: Callable[[], datetime],
    ) -> None:
        self._engine, self._source, self._owner, self._ttl, self._clock = (
            engine,
            source,
            owner,
            ttl,
            clock,
        )
        self.interval = max(0.5, min(5.0, ttl.total_seconds() / 3))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{source}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                with self._engine.begin() as conn:
                    held = renew(conn, self._source, self._owner, self._clock(), self._ttl)
            except SQLAlchemyError as exc:  # the run itself reports a database that went away
                log.warning("could not renew the reconciliation lease: %s", exc.__class__.__name__)
                continue
            if not held:
                log.warning(
                    "the reconciliation lease of %s was taken over",
                    self._source,
                    extra={"source": self._source},
                )
                return
