"""The applied mark: an event's business writes and its mark commit in one transaction.

A handler writes the application's tables through ``event.business`` (or through ``conn``, the
inbox's transaction). Whatever database that is, the transaction carrying the writes also inserts
the event's row in ``hookledger_applied`` (primary key: source, event id, replay round), so:

- a retry after any crash finds the mark and the writes are not applied again;
- a second runner's commit fails on the mark (it waits on the first's uncommitted row, then finds
  it), so two runners can never both apply one event;
- a replay raises the event's ``replays`` and runs the handler again, as the operator asked.

One database (``[business] url`` unset): ``event.business`` is ``conn`` itself, each ``begin()`` a
savepoint; the writes, the mark, the outbox's messages and the processed status are one transaction,
fenced by the lease (``worker._finish``).

Two databases: the business side is one transaction of its own for the whole attempt, opened at
the handler's first ``event.business`` block, each block a savepoint. After the handler returns, the
worker fences the inbox row (which also locks it: no one can claim the event while the business side
commits), inserts the mark on the business side and commits it, then commits the inbox side. A crash
between the two commits leaves the business writes applied and marked and the event still leased:
the retry runs the handler again for the inbox side (``conn``'s writes, the outbox's messages), finds
the mark and rolls back its business side.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, RootTransaction, inspect
from sqlalchemy.exc import SQLAlchemyError

from reconciler.errors import ConfigError
from reconciler.storage.dialect import CompiledOnce
from reconciler.storage.models import APPLIED


@dataclass(frozen=True)
class Mark:
    """Which event (and replay round) an attempt applies, and who applied it."""

    source: str
    event_id: str
    replay: int
    attempt: int
    worker: str


# compiled once per dialect: a dialect INSERT is compiled again on every execution otherwise
_INSERT_MARK = CompiledOnce(
    APPLIED,
    ("source", "event_id", "replay", "applied_at", "attempt", "worker"),
    # RETURNING, not rowcount: a row comes back only if this insert made it, on both dialects
    lambda insert: insert.on_conflict_do_nothing(
        index_elements=["source", "event_id", "replay"]
    ).returning(APPLIED.c.replay),
)


def insert_mark(conn: Connection, mark: Mark, now: datetime) -> bool:
    """Insert the mark in ``conn``'s transaction: False if it was there (applied before)."""
    row = {
        "source": mark.source,
        "event_id": mark.event_id,
        "replay": mark.replay,
        "applied_at": now,
        "attempt": mark.attempt,
        "worker": mark.worker[:128],
    }
    return bool(_INSERT_MARK.execute(conn, row))


def ensure_applied_table(engine: Engine) -> None:
    """Create ``hookledger_applied`` in a business database that lacks it (``hookledger init``,
    and a worker as it starts)."""
    try:
        APPLIED.create(engine, checkfirst=True)
    except SQLAlchemyError as exc:
        if inspect(engine).has_table(APPLIED.name):
            return  # another worker process created it meanwhile
        raise ConfigError(
            f"[business] url: cannot create the table {APPLIED.name} there "
            f"({exc.__class__.__name__}): run 'hookledger init' as a user that may create tables"
        ) from None


class BusinessSide:
    """The business database's part of one attempt (see the module): ``shared`` is the inbox's
    connection when the two are one database, else a transaction is opened on ``engine`` when the
    handler first asks for it."""

    def __init__(self, engine: Engine, shared: Connection | None = None) -> None:
        self.engine = engine
        self._shared = shared
        self._conn: Connection | None = None
        self._tx: RootTransaction | None = None

    @property
    def opened(self) -> bool:
        """Whether the handler used the business database in this attempt."""
        return self._shared is not None or self._conn is not None

    def connection(self) -> Connection:
        if self._shared is not None:
            return self._shared
        if self._conn is None:
            self._conn = self.engine.connect()
            self._tx = self._conn.begin()
        return self._conn

    @contextlib.contextmanager
    def block(self) -> Iterator[Connection]:
        """One ``with event.business.begin()`` block: a savepoint, so that an exception the handler
        catches undoes only its block's writes; nothing commits before the attempt's outcome."""
        conn = self.connection()
        with conn.begin_nested():
            yield conn

    def commit(self, mark: Mark | None, now: datetime) -> bool:
        """Separate database: insert the mark and commit the attempt's business writes with it.
        False (and rolled back) if an earlier attempt or another runner applied them. No mark: the
        drill's scratch database, where each delivery is applied as a replay would be."""
        if self._conn is None or self._tx is None:
            return True
        try:
            if mark is not None and not insert_mark(self._conn, mark, now):
                return False  # rolled back by close()
            self._tx.commit()
            return True
        finally:
            self.close()  # back to the pool before the inbox side commits

    def close(self) -> None:
        """Roll back whatever was not committed and give the connection back."""
        if self._conn is not None:
            self._conn.close()  # rolls back an open transaction
            self._conn = None
            self._tx = None
