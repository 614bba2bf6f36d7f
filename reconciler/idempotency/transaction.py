"""The application's writes in the transaction that stores its Idempotency-Key's response.

An endpoint behind ``IdempotencyMiddleware`` that writes through the connection this module hands it
commits those writes in the same database transaction as the key's completed response: a crash at any
point leaves both or neither, so a retry replays the stored response or runs the request once::

    from reconciler.idempotency import idempotent_transaction

    async def pay(request: Request) -> Response:
        body = await request.json()
        tx = idempotent_transaction(request)
        balance = await tx.run(add_to_balance, body["account"], body["cents"])
        return JSONResponse({"balance": balance}, 201)

    def add_to_balance(conn: Connection, account: str, cents: int) -> int:
        conn.execute(update(BALANCES).where(...).values(cents=BALANCES.c.cents + cents))
        return conn.execute(select(BALANCES.c.cents).where(...)).scalar_one()

A request has one transaction on the middleware's engine, begun when the app first asks for it and
settled by the middleware before any byte of the response leaves:

- a request with a key whose response is kept: once the app has produced its whole response, the
  key's completion (an UPDATE fenced by the request's lease token) runs in it, then COMMIT; when the
  fence matches no row (the lease was lost to another request), ROLLBACK;
- an exception, or a response that asks to be retried (408, 429, 5xx): ROLLBACK;
- a response that is not kept (no key, a method the middleware does not guard, a response over
  ``max_response_bytes``): COMMIT when the response starts (ROLLBACK for 408, 429, 5xx).

Threads: a SQLAlchemy ``Connection`` must never be used by two threads at once. ``await
tx.run(fn, *args)`` calls ``fn(conn, *args)`` on a worker thread, one call at a time: use it from
``async def`` endpoints, which must not block the event loop on the database (on SQLite a request
waiting there for the write lock would stall the request that holds it). ``tx.connection()`` hands
the connection itself to a sync endpoint (Starlette runs those on its thread pool); use it from that
thread only, and not after the endpoint returned. On the event loop's thread it raises.

::

    HookledgerError
    └── TransactionError   no transaction for this request (no middleware, or already settled)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import anyio
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from starlette.requests import HTTPConnection

from connectors.errors import HookledgerError

P = ParamSpec("P")
T = TypeVar("T")

SCOPE_KEY = (
    "hookledger.idempotency.transaction"  # where the middleware puts a request's transaction
)


class TransactionError(HookledgerError):
    """This request has no idempotent transaction: add ``IdempotencyMiddleware`` to the app."""


class IdempotentTransaction:
    """One request's transaction (see the module). ``key`` is the request's Idempotency-Key, None
    when the request has none (its transaction is a plain one)."""

    def __init__(self, engine: Engine, key: str | None) -> None:
        self.engine = engine
        self.key = key
        self._lock = threading.Lock()  # one thread at a time on the connection
        self._conn: Connection | None = None
        self._settled = False

    @property
    def pending(self) -> bool:
        """True while the app's writes are begun and neither committed nor rolled back."""
        return self._conn is not None

    async def run(
        self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``fn(conn, *args, **kwargs)`` on a worker thread, in this request's transaction."""

        def call() -> T:
            with self._lock:
                return fn(self._open(), *args, **kwargs)

        return await anyio.to_thread.run_sync(call)

    def connection(self) -> Connection:
        """The connection, in this request's transaction, for a sync endpoint's thread."""
        if _on_event_loop():
            raise TransactionError(
                "IdempotentTransaction.connection() blocks: call it from a sync endpoint (def), or "
                "use `await idempotent_transaction(request).run(fn, ...)` from an async one"
            )
        with self._lock:
            return self._open()

    def _open(self) -> Connection:
        if self._settled:
            raise TransactionError(
                "this request's transaction has ended: its response was settled (committed or "
                "rolled back); write before the endpoint returns its response"
            )
        if self._conn is None:
            conn = self.engine.connect()
            try:
                conn.begin()
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    # The middleware's side (an app never calls these: its writes would commit without the key's
    # response). Settling is shielded: a cancelled request still ends its transaction.

    async def commit(self, complete: Callable[[Connection], bool] | None = None) -> bool:
        """Run ``complete(conn)`` (the key's fenced completion) and COMMIT when it says True, else
        ROLLBACK; True when committed (or nothing was begun). A database error rolls back and is
        raised."""
        return await self._settle(complete, commit=True)

    async def rollback(self) -> None:
        """ROLLBACK the app's writes, if any."""
        await self._settle(None, commit=False)

    async def _settle(self, complete: Callable[[Connection], bool] | None, *, commit: bool) -> bool:
        if self._lock.acquire(blocking=False):  # the common case, nothing begun: no thread hop
            try:
                if self._conn is None:
                    self._settled = True
                    return True
            finally:
                self._lock.release()
        with anyio.CancelScope(shield=True):
            committed = await anyio.to_thread.run_sync(self._finish, complete, commit)
        return committed

    def _finish(self, complete: Callable[[Connection], bool] | None, commit: bool) -> bool:
        with self._lock:
            self._settled = True
            conn, self._conn = self._conn, None
            if conn is None:
                return True
            try:
                if commit and (complete is None or complete(conn)):
                    conn.commit()
                    return True
                conn.rollback()
                return False
            except BaseException:
                with contextlib.suppress(SQLAlchemyError):
                    conn.rollback()
                raise
            finally:
                conn.close()


def idempotent_transaction(request: HTTPConnection) -> IdempotentTransaction:
    """This request's transaction, given by ``IdempotencyMiddleware`` (see the module)."""
    tx = request.scope.get(SCOPE_KEY)
    if not isinstance(tx, IdempotentTransaction):
        raise TransactionError(
            "this request has no idempotent transaction: IdempotencyMiddleware did not see it "
            "(add it to the app's middleware, outside the routes that call idempotent_transaction)"
        )
    return tx


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
