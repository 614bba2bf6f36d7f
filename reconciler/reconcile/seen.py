"""The ids of a scan, page by page: which of them the inbox lacks (one batched lookup), and the ones the
scan has seen (``recon_seen``, appended in the page's transaction and read by the orphan anti-join).

Both run once per source page, a million times a scan at 1M events, so each is one statement through
the driver's own cursor, in the caller's transaction (SQLAlchemy's execute path costs ~45 us a
statement here, more than the statement), and the page's ids travel as ONE parameter:

- SQLite: a JSON array, unpacked by ``json_each``. Inserting 100 seen ids that way takes 110 us against
  265 us for an ``executemany`` of the same rows; the lookup asks for the ids the inbox lacks rather than
  those it holds (one row back instead of ~99): 0.28 against 0.40 s for 1,000 pages of 100.
- PostgreSQL: a JSON array too, unpacked by ``json_array_elements_text``. psycopg's adaptation of a
  100-element list parameter cost ~300 us of client CPU a statement (a JSON string: ~0.1 ms less for
  the lookup), and ``COPY`` of the seen ids ~400 us (the JSON insert: ~210 us).

``occurred_epoch`` is the oldest occurred time of the page an id came with: the table only serves the
scan's window start (its minimum), and one value per page spares a per-value conversion in the insert
(JSON pairs unpacked per value cost more than the ``executemany``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Connection, func, insert, select

from reconciler.storage.dialect import driver_execute
from reconciler.storage.models import INBOX_EVENTS, RECON_SEEN

_INBOX = INBOX_EVENTS.name
_SEEN = RECON_SEEN.name
# json_each is built into SQLite from 3.38 (earlier builds had it only with the JSON1 extension).
_SQLITE_JSON = sqlite3.sqlite_version_info >= (3, 38, 0)
LOOKUP_CHUNK = 5000  # ids per statement; well under SQLite's 32,766 bound parameters without JSON

_ABSENT_SQLITE_JSON = (
    f"SELECT j.value FROM json_each(?) AS j WHERE NOT EXISTS "
    f"(SELECT 1 FROM {_INBOX} AS e WHERE e.source = ? AND e.event_id = j.value)"
)
_ABSENT_PG = (
    f"SELECT x.id FROM json_array_elements_text(%s::json) AS x(id) WHERE NOT EXISTS "
    f"(SELECT 1 FROM {_INBOX} AS e WHERE e.source = %s AND e.event_id = x.id)"
)
_SEEN_SQLITE_JSON = (
    f"INSERT INTO {_SEEN} (source, event_id, occurred_epoch) SELECT ?, value, ? FROM json_each(?)"
)
_SEEN_SQLITE_ROWS = f"INSERT INTO {_SEEN} (source, event_id, occurred_epoch) VALUES (?, ?, ?)"
_SEEN_PG_JSON = (
    f"INSERT INTO {_SEEN} (source, event_id, occurred_epoch) "
    f"SELECT %s, x.id, %s FROM json_array_elements_text(%s::json) AS x(id)"
)


def absent_event_ids(conn: Connection, source: str, event_ids: Sequence[str]) -> set[str]:
    """Which of these event ids the inbox does not hold: one probe of the unique ``(source, event_id)``
    index per id, in one statement per chunk."""
    absent: set[str] = set()
    dialect = conn.dialect.name
    for start in range(0, len(event_ids), LOOKUP_CHUNK):
        chunk = list(event_ids[start : start + LOOKUP_CHUNK])
        if dialect == "postgresql":
            sql, params = _ABSENT_PG, (json.dumps(chunk), source)
        elif dialect == "sqlite" and _SQLITE_JSON:
            sql, params = _ABSENT_SQLITE_JSON, (json.dumps(chunk), source)
        else:
            held = conn.execute(
                select(INBOX_EVENTS.c.event_id).where(
                    INBOX_EVENTS.c.source == source, INBOX_EVENTS.c.event_id.in_(chunk)
                )
            ).scalars()
            absent.update(set(chunk).difference(held))
            continue
        absent.update(row[0] for row in driver_execute(conn, sql, params))
    return absent


def remember_seen(
    conn: Connection, source: str, event_ids: Sequence[str], oldest: datetime | None
) -> None:
    """Append a page's event ids with the page's oldest occurred time, in the caller's transaction."""
    if not event_ids:
        return
    epoch = oldest.timestamp() if oldest is not None else None
    dialect = conn.dialect
    if dialect.name == "sqlite" and _SQLITE_JSON:
        driver_execute(conn, _SEEN_SQLITE_JSON, (source, epoch, json.dumps(list(event_ids))))
    elif dialect.name == "sqlite":
        conn.exec_driver_sql(_SEEN_SQLITE_ROWS, [(source, i, epoch) for i in event_ids])
    elif dialect.name == "postgresql":
        driver_execute(conn, _SEEN_PG_JSON, (source, epoch, json.dumps(list(event_ids))))
    else:
        conn.execute(
            insert(RECON_SEEN),
            [{"source": source, "event_id": i, "occurred_epoch": epoch} for i in event_ids],
        )


def scan_start(conn: Connection, source: str) -> datetime | None:
    """The oldest record the current scan has seen (in this run or an interrupted one)."""
    epoch = conn.execute(
        select(func.min(RECON_SEEN.c.occurred_epoch)).where(RECON_SEEN.c.source == source)
    ).scalar()
    return datetime.fromtimestamp(float(epoch), UTC) if epoch is not None else None
