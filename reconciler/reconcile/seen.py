"""The ids of a scan, page by page: which of them the inbox lacks (one batched lookup), and the ones the
scan has seen (``recon_seen``: one row per page, its ids as a JSON array, read by the orphan
anti-join).

Both run once per source page, ten thousand times a scan at 1M events, so each is one statement
through the driver's own cursor, in the caller's transaction (SQLAlchemy's execute path costs ~45 us a
statement here, more than the statement), and the page's ids travel as ONE parameter, a JSON array:

- SQLite: unpacked by ``json_each`` for the lookup, which asks for the ids the inbox lacks rather than
  those it holds (one row back instead of ~99): 0.28 against 0.40 s for 1,000 pages of 100.
- PostgreSQL: unpacked by ``json_array_elements_text`` (psycopg's adaptation of a 100-element list
  parameter cost ~300 us of client CPU a statement; a JSON string ~0.1 ms less). The seen row and the
  lookup are ONE statement (a data-modifying CTE): every statement is a round trip to the server.

SQLite needs its JSON functions (built in from 3.38, and in most earlier builds as JSON1):
:func:`require_json` says so before a scan starts.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Connection, func, select

from reconciler.errors import ConfigError
from reconciler.storage.dialect import driver_execute
from reconciler.storage.models import INBOX_EVENTS, RECON_SEEN

_INBOX = INBOX_EVENTS.name
_SEEN = RECON_SEEN.name
LOOKUP_CHUNK = 5000  # ids per statement (and per recon_seen row)

_ABSENT_SQLITE = (
    f"SELECT j.value FROM json_each(?) AS j WHERE NOT EXISTS "
    f"(SELECT 1 FROM {_INBOX} AS e WHERE e.source = ? AND e.event_id = j.value)"
)
_SEEN_SQLITE = f"INSERT INTO {_SEEN} (source, event_ids, occurred_epoch) VALUES (?, ?, ?)"
_SEEN_AND_ABSENT_PG = (
    f"WITH page AS (SELECT %s::text AS ids), "
    f"seen AS (INSERT INTO {_SEEN} (source, event_ids, occurred_epoch) SELECT %s, ids, %s FROM page) "
    f"SELECT x.id FROM page, json_array_elements_text(page.ids::json) AS x(id) WHERE NOT EXISTS "
    f"(SELECT 1 FROM {_INBOX} AS e WHERE e.source = %s AND e.event_id = x.id)"
)


def _sqlite_has_json() -> bool:
    try:
        with sqlite3.connect(":memory:") as probe:
            probe.execute("SELECT value FROM json_each('[1]')").fetchall()
    except sqlite3.OperationalError:
        return False
    return True


SQLITE_JSON = _sqlite_has_json()  # the SQLite library this Python links (the one SQLAlchemy uses)


def require_json(dialect: str) -> None:
    """A clear error, before anything is written, where the database cannot unpack the id arrays."""
    if dialect == "sqlite" and not SQLITE_JSON:
        raise ConfigError(
            f"[database] url: this Python's SQLite ({sqlite3.sqlite_version}) has no JSON functions "
            "(json_each), which reconciliation needs; use SQLite 3.38 or newer (or a build with "
            "JSON1), or PostgreSQL"
        )


def _chunks(event_ids: Sequence[str]) -> list[str]:
    return [
        json.dumps(list(event_ids[start : start + LOOKUP_CHUNK]))
        for start in range(0, len(event_ids), LOOKUP_CHUNK)
    ]


def remember_and_find_absent(
    conn: Connection, source: str, event_ids: Sequence[str], oldest: datetime | None
) -> set[str]:
    """A page's ids: append them to the scan's seen ids, with the page's oldest occurred time, and
    return those the inbox lacks (one probe of the unique ``(source, event_id)`` index per id); on
    PostgreSQL one statement per chunk."""
    epoch = oldest.timestamp() if oldest is not None else None
    absent: set[str] = set()
    for chunk in _chunks(event_ids):
        if conn.dialect.name == "postgresql":
            rows = driver_execute(conn, _SEEN_AND_ABSENT_PG, (chunk, source, epoch, source))
        else:
            driver_execute(conn, _SEEN_SQLITE, (source, chunk, epoch))
            rows = driver_execute(conn, _ABSENT_SQLITE, (chunk, source))
        absent.update(row[0] for row in rows)
    return absent


def scan_start(conn: Connection, source: str) -> datetime | None:
    """The oldest record the current scan has seen (in this run or an interrupted one)."""
    epoch = conn.execute(
        select(func.min(RECON_SEEN.c.occurred_epoch)).where(RECON_SEEN.c.source == source)
    ).scalar()
    return datetime.fromtimestamp(float(epoch), UTC) if epoch is not None else None
