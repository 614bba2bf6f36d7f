"""Idempotency keys in the hookledger database: the statements behind the middleware.

The database decides who runs a request: the first request with a key inserts its row (``INSERT ...
ON CONFLICT (owner, key) DO NOTHING``) and holds a lease on it; every other request with the key
reads the row and is told to replay the stored response, to refuse a reuse with other parameters,
to wait (the first is still running), or to take the key over (the first's lease ran out: its
process died, or the key expired). A take-over is a conditional UPDATE, so two requests can never
both take one key. Completion is conditional on still holding the lease.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, or_, select, update

from reconciler.storage.dialect import dialect_insert, name_of
from reconciler.storage.models import IDEMPOTENCY_KEYS, IdempotencyStatus

KEYS = IDEMPOTENCY_KEYS


@dataclass(frozen=True)
class StoredResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class Attempt:
    """One request's claim on a key."""

    owner: str
    key: str
    fingerprint: str
    method: str
    path: str
    token: str  # this request's lease token


class Decision(enum.Enum):
    RUN = "run"  # this request holds the key: run the app, then complete or release
    REPLAY = "replay"  # the first request's response is stored: send it
    MISMATCH = "mismatch"  # the key was used for another request (method, path or body)
    BUSY = "busy"  # the first request is still running (its lease holds)


@dataclass(frozen=True)
class Found:
    decision: Decision
    response: StoredResponse | None = None
    stored_method: str | None = None  # MISMATCH: what the key was first used for
    stored_path: str | None = None


# Built once (a statement built per call spends most of its time in SQLAlchemy's coercion and
# cache-key code); SET columns and inserted values come from the parameters' names.
_FIND = select(KEYS).where(KEYS.c.owner == bindparam("b_owner"), KEYS.c.key == bindparam("b_key"))
_EXPIRED = update(KEYS).where(
    KEYS.c.id == bindparam("b_id"), KEYS.c.expires_at <= bindparam("b_now")
)
_LEASE_OVER = update(KEYS).where(
    KEYS.c.id == bindparam("b_id"),
    KEYS.c.status == IdempotencyStatus.IN_PROGRESS,
    KEYS.c.lease_expires_at <= bindparam("b_now"),
)
_HELD = (
    KEYS.c.owner == bindparam("b_owner"),
    KEYS.c.key == bindparam("b_key"),
    KEYS.c.lease_owner == bindparam("b_token"),
    KEYS.c.status == IdempotencyStatus.IN_PROGRESS,
)
_UPDATE_HELD = update(KEYS).where(*_HELD)
_RELEASE = delete(KEYS).where(*_HELD)


@functools.cache
def _insert(dialect: str) -> Any:
    """Insert-if-new, its values from the parameters; RETURNING says exactly whether it inserted
    on both databases (rowcount does not)."""
    table_insert = dialect_insert(dialect, KEYS)
    return table_insert.on_conflict_do_nothing(index_elements=["owner", "key"]).returning(KEYS.c.id)


def _params(attempt: Attempt) -> dict[str, Any]:
    return {"b_owner": attempt.owner, "b_key": attempt.key, "b_token": attempt.token}


def begin(
    conn: Connection, attempt: Attempt, *, now: datetime, lease: timedelta, retention: timedelta
) -> Found:
    """Claim the key for this request, or say what the stored row asks for (see the module)."""
    fresh = {
        "fingerprint": attempt.fingerprint,
        "method": attempt.method,
        "path": attempt.path,
        "status": IdempotencyStatus.IN_PROGRESS,
        "lease_owner": attempt.token,
        "lease_expires_at": now + lease,
        "response_status": None,
        "response_headers": None,
        "response_body": None,
        "created_at": now,
        "completed_at": None,
        "expires_at": now + retention,
    }
    values = {"owner": attempt.owner, "key": attempt.key, **fresh}
    if conn.execute(_insert(name_of(conn)), values).first() is not None:
        return Found(Decision.RUN)
    row = conn.execute(_FIND, _params(attempt)).first()
    if row is None:  # expired and pruned between the two statements: the next try inserts
        return Found(Decision.BUSY)
    if row.expires_at <= now:  # forgotten: the key starts over, whatever it was used for
        return _take_over(conn, _EXPIRED, row.id, now, fresh)
    if row.fingerprint != attempt.fingerprint:
        return Found(Decision.MISMATCH, stored_method=row.method, stored_path=row.path)
    if row.status == IdempotencyStatus.COMPLETED:
        return Found(Decision.REPLAY, stored_response(row))
    if row.lease_expires_at is not None and row.lease_expires_at <= now:
        # the first request's process died mid-way: this one runs it (its key, its parameters)
        return _take_over(conn, _LEASE_OVER, row.id, now, fresh | {"created_at": row.created_at})
    return Found(Decision.BUSY)


def _take_over(
    conn: Connection, stmt: Any, row_id: int, now: datetime, values: dict[str, Any]
) -> Found:
    done = conn.execute(stmt, {"b_id": row_id, "b_now": now, **values})
    return Found(Decision.RUN if done.rowcount == 1 else Decision.BUSY)


def stored_response(row: Any) -> StoredResponse:
    headers = [(str(k), str(v)) for k, v in (row.response_headers or {}).get("list", [])]
    return StoredResponse(int(row.response_status), headers, bytes(row.response_body or b""))


def complete(
    conn: Connection, attempt: Attempt, response: StoredResponse, *, now: datetime
) -> bool:
    """Store the response that answers every repeat; False when the lease was lost."""
    done = conn.execute(
        _UPDATE_HELD,
        {
            **_params(attempt),
            "status": IdempotencyStatus.COMPLETED,
            "lease_owner": None,
            "lease_expires_at": None,
            "response_status": response.status,
            "response_headers": {"list": [list(h) for h in response.headers]},
            "response_body": response.body,
            "completed_at": now,
        },
    )
    return done.rowcount == 1


def release(conn: Connection, attempt: Attempt) -> None:
    """Forget the key (the request failed without a response to keep): a retry runs anew."""
    conn.execute(_RELEASE, _params(attempt))


def renew(conn: Connection, attempt: Attempt, until: datetime) -> bool:
    """Extend the lease of a request that is still running; False when it was lost."""
    done = conn.execute(_UPDATE_HELD, {**_params(attempt), "lease_expires_at": until})
    return done.rowcount == 1


def prune_expired(conn: Connection, now: datetime, *, dry_run: bool = False) -> int:
    """Delete keys past their retention (a running request's key is kept until its lease ends)."""
    gone = (KEYS.c.expires_at <= now) & or_(
        KEYS.c.status == IdempotencyStatus.COMPLETED,
        KEYS.c.lease_expires_at.is_(None),
        KEYS.c.lease_expires_at <= now,
    )
    if dry_run:
        return int(conn.execute(select(func.count()).select_from(KEYS).where(gone)).scalar_one())
    return int(conn.execute(delete(KEYS).where(gone)).rowcount or 0)
