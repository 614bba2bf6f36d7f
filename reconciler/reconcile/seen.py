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
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

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
# PostgreSQL: the page's probe also keeps the orphan pass's tally (:class:`ListedTally`), in ONE row:
# the absent ids as an array, then how many of the ids the inbox holds and the sum of their hashes.
# It reads the unique index alone, as the plain lookup did (a tally of the inbox rows' own times and
# origins read their heap: +0.25 ms a page at 1M; a row per absent id and a tally row, as a CTE read
# twice: +0.2 ms a page at 100k).
_PROBE_PG = (
    "SELECT array_agg(x.id) FILTER (WHERE e.event_id IS NULL), count(e.event_id), "
    "sum(hashtextextended(x.id, 0)) FILTER (WHERE e.event_id IS NOT NULL) "
    "FROM json_array_elements_text({ids}::json) AS x(id) "
    f"LEFT JOIN {_INBOX} AS e ON e.source = %(source)s AND e.event_id = x.id"
)
_SEEN_AND_ABSENT_PG = (
    "WITH page AS (SELECT %(ids)s::text AS ids), "
    f"seen AS (INSERT INTO {_SEEN} (source, event_ids, occurred_epoch) "
    "SELECT %(source)s, ids, %(epoch)s FROM page) "
    + _PROBE_PG.replace("{ids}", "(SELECT ids FROM page)")
)


@dataclass
class ListedTally:
    """What a scan's page lookups found of the inbox on PostgreSQL, for the orphan pass: how many of
    the listed ids the inbox holds, the sum of their ``hashtextextended`` values, and how many
    ``recon_seen`` rows the scan wrote alongside.

    :func:`findings.record_orphans` takes the same count and sum over every inbox event of the
    source from the scan's window start on (whatever its origin or receipt time), which holds the
    orphan window and, but for a stored time far off the provider's, every event counted here.
    Equal, the two are the same set (but for a collision of 64-bit hash sums between different sets
    of ids): every inbox event since the window start was listed, so there is no orphan to look for.
    The sum also keeps an id listed twice from standing in for one not listed. Anything else
    (an orphan; an event that arrived after the source's list was read, as during a first scan with
    traffic; ``recon_seen`` holding rows of an earlier, interrupted scan) leaves the decision to the
    anti-join, as without a tally."""

    count: int = 0
    hash_sum: int = 0
    seen_rows: int = 0

    def add(self, rows: Sequence[Any]) -> set[str]:
        """Take a probe's one row (:data:`_PROBE_PG`) into the tally; return the absent ids."""
        ((absent, count, hash_sum),) = rows
        if count:
            self.count += count
            self.hash_sum += int(hash_sum)
        self.seen_rows += 1
        return set(absent) if absent else set()


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
    conn: Connection,
    source: str,
    event_ids: Sequence[str],
    oldest: datetime | None,
    tally: ListedTally | None = None,
) -> set[str]:
    """A page's ids: append them to the scan's seen ids, with the page's oldest occurred time, and
    return those the inbox lacks (one probe of the unique ``(source, event_id)`` index per id). On
    PostgreSQL one statement per chunk, which also adds to ``tally`` (required there)."""
    epoch = oldest.timestamp() if oldest is not None else None
    absent: set[str] = set()
    for chunk in _chunks(event_ids):
        if conn.dialect.name == "postgresql":
            if tally is None:
                raise ValueError("a PostgreSQL page lookup needs the scan's ListedTally")
            params = {"ids": chunk, "source": source, "epoch": epoch}
            absent |= tally.add(driver_execute(conn, _SEEN_AND_ABSENT_PG, params))
        else:
            driver_execute(conn, _SEEN_SQLITE, (source, chunk, epoch))
            absent.update(row[0] for row in driver_execute(conn, _ABSENT_SQLITE, (chunk, source)))
    return absent


def seen_so_far(conn: Connection, source: str) -> tuple[datetime | None, int]:
    """The oldest record the current scan has seen (in this run or an interrupted one), and how many
    ``recon_seen`` rows hold its ids."""
    epoch, rows = conn.execute(
        select(func.min(RECON_SEEN.c.occurred_epoch), func.count()).where(
            RECON_SEEN.c.source == source
        )
    ).one()
    start = datetime.fromtimestamp(float(epoch), UTC) if epoch is not None else None
    return start, int(rows)


def scan_start(conn: Connection, source: str) -> datetime | None:
    """The oldest record the current scan has seen (in this run or an interrupted one)."""
    return seen_so_far(conn, source)[0]
