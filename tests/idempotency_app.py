"""A small API behind ``IdempotencyMiddleware`` for the idempotency tests: ``POST /add`` adds cents
to an account's balance, which is not idempotent on purpose. It writes through the middleware's
transaction (``idempotent_transaction``), or with ``own_engine`` through an engine of its own.

Run as a process by the kill tests, on a listening socket the test hands down (so the port stays the
same across restarts and no other process can take it)::

    python -m tests.idempotency_app FD DATABASE_URL WRITES CRASH MARKER

WRITES is ``middleware`` or ``own``; CRASH is where the process stops, once, for the test to
SIGKILL it (it writes MARKER, then sleeps): ``none``, ``after-write`` (in the endpoint, after its
write; with ``own`` after its own commit), ``at-commit`` (the middleware's transaction: the key's
completion has run, its COMMIT has not) or ``after-commit`` (committed, the response not sent).
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    event,
    select,
    update,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reconciler.idempotency import IdempotencyMiddleware, idempotent_transaction
from reconciler.idempotency.store import KEYS

BALANCES = Table(
    "idem_test_balances",
    MetaData(),
    Column("account", String(64), primary_key=True),
    Column("cents", Integer, nullable=False),
)
CRASH_AT_COMMIT = "hookledger_test_crash_at_commit"  # Connection.info flag read by the hook


def reset_balances(engine: Engine, **accounts: int) -> None:
    BALANCES.create(engine, checkfirst=True)
    with engine.begin() as conn:
        conn.execute(BALANCES.delete())
        for account, cents in accounts.items():
            conn.execute(BALANCES.insert().values(account=account, cents=cents))


def drop_balances(engine: Engine) -> None:
    """The table out of the shared test schema: the migrations' test compares it with the models."""
    BALANCES.drop(engine, checkfirst=True)


def balance(engine: Engine, account: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(select(BALANCES.c.cents).where(BALANCES.c.account == account)).scalar_one()
        )


def add(conn: Connection, account: str, cents: int) -> int:
    """Not idempotent: every call adds."""
    conn.execute(
        update(BALANCES).where(BALANCES.c.account == account).values(cents=BALANCES.c.cents + cents)
    )
    return int(
        conn.execute(select(BALANCES.c.cents).where(BALANCES.c.account == account)).scalar_one()
    )


def take_key_over(engine: Engine, key: str) -> None:
    """What another request does once this one's lease ran out: the key's lease is its now."""
    with engine.begin() as conn:
        conn.execute(update(KEYS).where(KEYS.c.key == key).values(lease_owner="someone-else"))


def make_app(
    engine: Engine,
    *,
    own_engine: bool = False,
    stop: Callable[[str], None] | None = None,
    **options: Any,
) -> Starlette:
    """``stop(point)`` is called where the process may be killed (see the module)."""

    async def add_route(request: Request) -> Response:
        body = await request.json()
        then = body.get("then")
        key = request.headers.get("idempotency-key")
        if then == "steal" and key:  # another request takes the key over before this one commits
            await asyncio.to_thread(take_key_over, engine, key)
        if own_engine:
            cents = await asyncio.to_thread(_own_add, engine, body["account"], body["cents"])
        else:
            tx = idempotent_transaction(request)
            cents = await tx.run(add, body["account"], body["cents"])
            if stop is not None:
                await tx.run(_stop_at_commit)
        if stop is not None:
            stop("after-write")
        if then == "raise":
            raise RuntimeError("the app failed after its write")
        if then == "twice":
            tx = idempotent_transaction(request)
            await asyncio.gather(*(tx.run(add, body["account"], 1) for _ in range(2)))
        if then == "sleep":
            await asyncio.sleep(float(body["seconds"]))
        status = int(body.get("status", 201))
        return JSONResponse({"balance": cents, "key": key}, status)

    def sync_add(request: Request) -> Response:  # Starlette runs it on its thread pool
        tx = idempotent_transaction(request)
        cents = add(
            tx.connection(), request.query_params["account"], int(request.query_params["cents"])
        )
        return JSONResponse({"balance": cents, "key": tx.key})

    async def misuse(request: Request) -> Response:
        idempotent_transaction(request).connection()  # raises on the event loop's thread
        return Response(status_code=204)

    if stop is not None:

        @event.listens_for(engine, "commit")
        def at_commit(conn: Connection) -> None:
            if conn.info.pop(CRASH_AT_COMMIT, False):
                stop("at-commit")

    middleware = [Middleware(IdempotencyMiddleware, engine=engine, **options)]
    if stop is not None:
        middleware.insert(0, Middleware(_StopBeforeSending, stop=stop))
    return Starlette(
        routes=[
            Route("/add", add_route, methods=["POST"]),
            Route("/sync-add", sync_add, methods=["POST", "GET"]),
            Route("/misuse", misuse, methods=["POST"]),
        ],
        middleware=middleware,
    )


def _stop_at_commit(conn: Connection) -> None:
    conn.info[CRASH_AT_COMMIT] = True  # the DBAPI connection's: popped by the commit hook


def _own_add(engine: Engine, account: str, cents: int) -> int:
    with engine.begin() as conn:  # the app's own transaction, committed here
        return add(conn, account, cents)


class _StopBeforeSending:
    """Outside the idempotency middleware: sees a response once it was stored, before it is sent."""

    def __init__(self, app: ASGIApp, stop: Callable[[str], None]) -> None:
        self.app, self.stop = app, stop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def stopping(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.stop("after-commit")
            await send(message)

        await self.app(scope, receive, stopping)


def main(argv: list[str]) -> None:
    from reconciler.storage.engine import make_engine

    fd, url, writes, crash, marker = argv
    engine = make_engine(url)

    def stop(point: str) -> None:
        if point == crash:
            Path(marker).write_text(point)
            time.sleep(60)  # the test kills the process here

    app = make_app(
        engine,
        own_engine=writes == "own",
        stop=stop,
        lease_seconds=1.0,
        wait_seconds=10,
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[socket.socket(fileno=int(fd))])


if __name__ == "__main__":
    main(sys.argv[1:])
