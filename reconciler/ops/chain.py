"""The chain behind one correlation id: from the request to the business rows (read-only).

The inbox holds the deliveries and attempts (``inbox.replay.event_detail``); this adds the rows the
source's ``[[sources.checks]]`` find for the event's object in the business tables, as the
reconciliation reads them (read-only, within ``[business] statement_timeout_seconds``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from sqlalchemy import Engine, select

from reconciler.config import Settings
from reconciler.errors import DatabaseError, HookledgerError
from reconciler.reconcile.business import bind_checks
from reconciler.reconcile.store import read_only_session
from reconciler.storage.engine import make_engine

MAX_ROWS = 20  # an object has one row per table (two are a duplicate); more are not a chain


@dataclass(frozen=True)
class BusinessRows:
    table: str
    key: str
    rows: list[dict[str, Any]]
    error: str | None = None  # the table could not be read (named, one line)


def _applies(check: Any, event_type: str | None, object_type: str | None) -> bool:
    if check.object_type:
        return bool(object_type) and check.object_type == object_type
    return bool(event_type) and any(fnmatchcase(event_type, p) for p in check.event_types)


def business_rows(
    inbox: Engine,
    settings: Settings,
    *,
    source: str,
    event_type: str | None,
    object_type: str | None,
    object_id: str | None,
) -> list[BusinessRows]:
    """The business rows (whole rows) of the event's object, per check of its source that
    covers it."""
    configured = settings.source(source)
    if configured is None or not configured.checks or not object_id:
        return []
    url = settings.business.url
    business = make_engine(url, readonly=True) if url else inbox
    timeout = settings.business.statement_timeout_seconds
    try:
        try:
            checks = bind_checks(business, configured, timeout)
        except HookledgerError as exc:  # a check that no longer fits the table, or no database
            return [BusinessRows("?", object_id, [], str(exc).splitlines()[0])]
        out = []
        with business.connect() as conn, read_only_session(conn, timeout):
            for check in checks:
                if not _applies(check.check, event_type, object_type):
                    continue
                t = check.table
                stmt = select(t).where(t.c[check.check.key] == str(object_id)).limit(MAX_ROWS)
                if (scope := check.scope()) is not None:
                    stmt = stmt.where(scope)
                try:
                    found = [dict(r._mapping) for r in conn.execute(stmt)]
                except DatabaseError as exc:
                    reason = f"the business query failed ({exc.__class__.__name__})"
                    out.append(BusinessRows(check.check.table, object_id, [], reason))
                    continue
                out.append(BusinessRows(check.check.table, object_id, found))
        return out
    finally:
        if business is not inbox:
            business.dispose()
