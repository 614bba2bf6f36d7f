"""The ids of a scan: which of a batch's the inbox holds, and the ones it has seen (``recon_seen``),
written in bulk with each batch and read by the orphan anti-join.

The table is an append-only heap (see ``ReconSeen``), so the write is the cheapest bulk path of each
driver: ``COPY`` on PostgreSQL (psycopg), one ``executemany`` on SQLite (a C loop over the rows), and a
multi-row ``INSERT`` elsewhere. The values need no conversion: the occurred time is epoch seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, func, insert, select

from connectors.base import Record
from reconciler.storage.models import INBOX_EVENTS, RECON_SEEN

_COLUMNS = ("source", "event_id", "occurred_epoch")
_SQLITE_INSERT = f"INSERT INTO {RECON_SEEN.name} ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
_PG_COPY = f"COPY {RECON_SEEN.name} ({', '.join(_COLUMNS)}) FROM STDIN"


LOOKUP_CHUNK = 5000  # well under SQLite's 32,766 bound parameters


def present_event_ids(conn: Connection, source: str, event_ids: Sequence[str]) -> set[str]:
    """Which of these event ids the inbox holds: one index lookup per id in one statement per chunk
    (the unique ``(source, event_id)`` index covers it). Plain driver SQL: at a thousand ids a batch,
    SQLAlchemy's per-value IN expansion and per-row result objects cost more than the lookup itself
    (0.22 against 0.15 s for 100k ids).
    PostgreSQL gets one array parameter (``= ANY``), SQLite a ``?`` per id."""
    table = INBOX_EVENTS.name
    present: set[str] = set()
    for start in range(0, len(event_ids), LOOKUP_CHUNK):
        chunk = list(event_ids[start : start + LOOKUP_CHUNK])
        if conn.dialect.name == "postgresql":
            sql = f"SELECT event_id FROM {table} WHERE source = %s AND event_id = ANY(%s)"
            params: tuple[Any, ...] = (source, chunk)
        else:
            marks = ", ".join("?" * len(chunk))
            sql = f"SELECT event_id FROM {table} WHERE source = ? AND event_id IN ({marks})"
            params = (source, *chunk)
        raw: Any = conn.connection.dbapi_connection  # the same connection and transaction
        cursor = raw.cursor()
        try:
            cursor.execute(sql, params)
            present.update(row[0] for row in cursor.fetchall())
        finally:
            cursor.close()
    return present


def seen_rows(source: str, records: Sequence[Record]) -> list[tuple[str, str, float | None]]:
    """One row per record with an event id (object-only records cannot be orphan-checked)."""
    return [
        (source, r.event_id, r.occurred_at.timestamp() if r.occurred_at else None)
        for r in records
        if r.event_id
    ]


def remember_seen(conn: Connection, source: str, records: Sequence[Record]) -> None:
    """Append the records' event ids, in the caller's transaction."""
    rows = seen_rows(source, records)
    if not rows:
        return
    dialect = conn.dialect
    if dialect.name == "sqlite":
        conn.exec_driver_sql(_SQLITE_INSERT, rows)
    elif dialect.name == "postgresql" and dialect.driver == "psycopg":
        raw: Any = conn.connection.dbapi_connection  # the same connection, so the same transaction
        with raw.cursor() as cur, cur.copy(_PG_COPY) as copy:
            for row in rows:
                copy.write_row(row)
    else:
        conn.execute(insert(RECON_SEEN), [dict(zip(_COLUMNS, row, strict=True)) for row in rows])


def scan_start(conn: Connection, source: str) -> datetime | None:
    """The oldest record the current scan has seen (in this run or an interrupted one)."""
    epoch = conn.execute(
        select(func.min(RECON_SEEN.c.occurred_epoch)).where(RECON_SEEN.c.source == source)
    ).scalar()
    return datetime.fromtimestamp(float(epoch), UTC) if epoch is not None else None
