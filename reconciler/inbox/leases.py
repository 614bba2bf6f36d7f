"""Holding a worker's leases while its attempts run.

A claim leases each event for ``[worker] lease_seconds``. A lease keeper renews every lease an owner
holds (its running event and the rest of its claimed batch) every third of that, so a handler
slower than the lease keeps its event and no second worker runs it meanwhile. What stops the
renewals is what frees the event: the owner's process dying (a claim takes the event once the lease
runs out) or the supervisor abandoning an attempt past ``handler_timeout_seconds``
(``inbox.supervisor``). The lease is also checked inside the committing transaction (the fence in
``inbox.worker``), so even a worker that lost its lease cannot commit.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Collection, Iterator
from datetime import datetime, timedelta

from sqlalchemy import Engine, bindparam, update

from reconciler.storage.models import INBOX_EVENTS as EVENTS
from reconciler.storage.models import EventStatus
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)

_RENEW = (
    update(EVENTS)
    .where(
        EVENTS.c.lease_owner.in_(bindparam("owners", expanding=True)),
        EVENTS.c.status == EventStatus.PROCESSING,
    )
    .values(lease_expires_at=bindparam("until"), next_attempt_at=bindparam("until"))
)


def renew_interval(lease_seconds: float) -> float:
    """How often a lease is renewed: well inside it, so that one late renewal does not lose it."""
    return lease_seconds / 3


class LeaseKeeper:
    def __init__(
        self, engine: Engine, lease_seconds: float, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._engine = engine
        self._lease = timedelta(seconds=lease_seconds)
        self.interval = renew_interval(lease_seconds)
        self._clock = clock

    def renew(self, owners: Collection[str]) -> int:
        """Extend every lease these owners hold; how many events that was."""
        if not owners:
            return 0
        with self._engine.begin() as conn:
            result = conn.execute(
                _RENEW, {"owners": sorted(owners), "until": self._clock() + self._lease}
            )
        return result.rowcount

    def renew_quietly(self, owners: Collection[str]) -> None:
        """:meth:`renew`, a failure logged: the next tick tries again, well before the lease ends."""
        try:
            self.renew(owners)
        except Exception as exc:
            log.warning("could not renew the worker's leases: %s", exc.__class__.__name__)

    @contextlib.contextmanager
    def holding(self, owners: Callable[[], Collection[str]]) -> Iterator[None]:
        """Renew ``owners()``' leases from a daemon thread until the block ends."""
        done = threading.Event()

        def beat() -> None:
            while not done.wait(self.interval):
                self.renew_quietly(owners())

        thread = threading.Thread(target=beat, name="hookledger-lease-keeper", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
