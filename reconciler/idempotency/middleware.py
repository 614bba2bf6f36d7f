"""An ASGI middleware that makes the team's own mutating API idempotent with an ``Idempotency-Key``
header (Starlette, FastAPI, any ASGI app), keyed in the hookledger database (``idempotency_keys``)::

    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from reconciler.idempotency import IdempotencyMiddleware
    from reconciler.storage.engine import make_engine

    app = Starlette(
        routes=[...],
        middleware=[Middleware(IdempotencyMiddleware, engine=make_engine(DATABASE_URL))],
    )

A request of a guarded method (POST, PUT, PATCH, DELETE) with the header is fingerprinted (method,
path, query string, content type and body; a JSON body that names a key twice is refused with
``400``, since parsers disagree on which value counts). The first request with a key runs the app; its response, once the app has
produced it whole, is stored before it is sent, and answers every repeat with the same key and
fingerprint (``Idempotent-Replayed: true``) without running the app again. A repeat that arrives
while the first still runs waits up to ``wait_seconds`` for it, then gets the stored response, or
``409``. The same key with another fingerprint gets ``422`` and the app does not run. A response
that asks to be retried (408, 429, 5xx) or an exception keeps nothing: the key is released and a
retry runs the request again. A request whose process died leaves its key in progress until its
lease (renewed while the app runs) runs out; then a retry may take it over. Keys are forgotten after
``retention`` (7 days: the longest provider retry window plus margin) and ``hookledger prune``
deletes them. Errors are RFC 9457 problem details (``application/problem+json``).

An app that writes its effect through ``idempotent_transaction(request)`` (``transaction``) has it
committed in the transaction that stores the response: a crash leaves both or neither. Writes through
the app's own engine commit before the response is stored, so a crash in between lets a retry run
the app again once the lease has run out (at-least-once).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import anyio
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from connectors.retry import transient_status
from reconciler.idempotency import store
from reconciler.idempotency.asgi import (
    Capture,
    HeldResponse,
    answer,
    header_value,
    problem,
    read_body,
    replaying,
)
from reconciler.idempotency.keys import (
    NO_POLICY,
    DuplicateKeyError,
    RoutePolicy,
    canonical_body,
    fingerprint,
    parse_key,
    policy_for,
)
from reconciler.idempotency.transaction import SCOPE_KEY, IdempotentTransaction
from reconciler.storage.types import utcnow

log = logging.getLogger(__name__)
T = TypeVar("T")

Owner = Callable[[Request], "str | Awaitable[str]"]
DEFAULT_METHODS = ("POST", "PUT", "PATCH", "DELETE")
DEFAULT_RETENTION = timedelta(days=7)
# headers a stored response never keeps: the transport's own, recomputed for every answer
NOT_STORED = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "date", "server"}
)
MAX_OWNER = 255


def default_owner(request: Request) -> str:
    """Who may reuse a key: the authenticated user when an authentication middleware ran before
    this one, else a hash of the ``Authorization`` header (never stored as is), else everyone."""
    user = request.scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False):
        return f"user:{getattr(user, 'identity', None) or user.display_name}"[:MAX_OWNER]
    auth = request.headers.get("authorization")
    if auth:
        return "authorization:" + hashlib.sha256(auth.encode()).hexdigest()
    return "anonymous"


class IdempotencyMiddleware:
    """See the module. ``owner(request)`` scopes keys (sync or async); ``stored_headers`` limits
    which response headers are kept (default: all but the transport's own)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        engine: Engine,
        header: str = "Idempotency-Key",
        owner: Owner = default_owner,
        methods: Collection[str] = DEFAULT_METHODS,
        retention: timedelta = DEFAULT_RETENTION,
        lease_seconds: float = 60.0,
        wait_seconds: float = 5.0,
        max_body_bytes: int = 1_048_576,
        max_response_bytes: int = 1_048_576,
        stored_headers: Collection[str] | None = None,
        policies: Sequence[tuple[str, RoutePolicy]] = (),
        default_policy: RoutePolicy = NO_POLICY,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if lease_seconds <= 0 or wait_seconds < 0 or retention <= timedelta(0):
            raise ValueError("lease_seconds and retention must be positive, wait_seconds >= 0")
        self.app = app
        self.engine = engine
        self.header = header.lower().encode("latin-1")
        self.header_name = header
        self.owner = owner
        self.methods = frozenset(m.upper() for m in methods)
        self.retention = retention
        self.lease = timedelta(seconds=lease_seconds)
        self.wait_seconds = wait_seconds
        self.max_body = max_body_bytes
        self.max_response = max_response_bytes
        self.stored_headers = (
            None if stored_headers is None else frozenset(h.lower() for h in stored_headers)
        )
        self.policies = tuple(policies)
        for pattern, _ in self.policies:
            if " " not in pattern.strip():
                raise ValueError(f"policy {pattern!r}: 'METHOD /path' ('*' for any method)")
        self.default_policy = default_policy
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] not in self.methods:
            await self._plain(scope, receive, send)
            return
        policy = policy_for(self.policies, self.default_policy, scope["method"], scope["path"])
        raw = [v for k, v in scope["headers"] if k == self.header]
        if not raw:
            if policy.required:
                await answer(
                    send,
                    *problem(
                        400,
                        "Idempotency key required",
                        f"{scope['method']} {scope['path']} needs an {self.header_name} header "
                        '(a unique string, e.g. Idempotency-Key: "<a UUID>")',
                    ),
                )
                return
            await self._plain(scope, receive, send)
            return
        key = parse_key(raw)
        if key is None:
            await answer(
                send,
                *problem(
                    400,
                    "Invalid idempotency key",
                    f"{self.header_name} must appear once and be 1-255 visible ASCII characters "
                    '(a structured-field string, "…", or the bare key)',
                ),
            )
            return
        body = await read_body(receive, self.max_body)
        if body is None:
            await answer(
                send,
                *problem(
                    413,
                    "Request body too large",
                    f"a request with {self.header_name} may carry at most {self.max_body} bytes",
                ),
            )
            return
        content_type = header_value(scope, b"content-type")
        try:
            compared = body if policy.fingerprint == "bytes" else canonical_body(body, content_type)
        except DuplicateKeyError as exc:
            await answer(send, *problem(400, "Ambiguous JSON body", f"{exc}: send each once"))
            return
        owner = self.owner(Request(scope))
        if inspect.isawaitable(owner):
            owner = await owner
        attempt = store.Attempt(
            owner=str(owner)[:MAX_OWNER],
            key=key,
            fingerprint=fingerprint(
                scope["method"],
                scope["path"],
                scope.get("query_string", b""),
                content_type,
                compared,
            ),
            method=scope["method"],
            path=scope["path"][:2048],
            token=uuid.uuid4().hex,
        )
        found = await self._begin_or_wait(attempt, policy.retention or self.retention)
        if found.decision is store.Decision.RUN:
            await self._run(scope, receive, send, attempt, body)
        elif found.decision is store.Decision.REPLAY and found.response is not None:
            r = found.response
            headers = [*r.headers, ("idempotent-replayed", "true")]
            await answer(send, r.status, r.body, headers)
        elif found.decision is store.Decision.MISMATCH:
            log.warning(
                "idempotency key %r reused for %s %s; it was first used for %s %s with other "
                "parameters (owner %s)",
                key,
                attempt.method,
                attempt.path,
                found.stored_method,
                found.stored_path,
                hashlib.sha256(attempt.owner.encode()).hexdigest()[:12],
            )
            await answer(
                send,
                *problem(
                    422,
                    "Idempotency key reused",
                    f"{self.header_name} {key!r} was first used for {found.stored_method} "
                    f"{found.stored_path} with other parameters; this request is "
                    f"{attempt.method} {attempt.path}. Use a new key for a new request.",
                    key=key,
                ),
            )
        else:
            await answer(
                send,
                *problem(
                    409,
                    "Request in progress",
                    f"a request with {self.header_name} {key!r} is still being processed; "
                    "retry later with the same key",
                    key=key,
                ),
            )

    async def _begin_or_wait(self, attempt: store.Attempt, retention: timedelta) -> store.Found:
        deadline = anyio.current_time() + self.wait_seconds
        pause = 0.02
        while True:
            found = await self._db(self._begin, attempt, retention)
            if found.decision is not store.Decision.BUSY or anyio.current_time() >= deadline:
                return found
            await anyio.sleep(min(pause, max(0.0, deadline - anyio.current_time())))
            pause = min(pause * 2, 0.25)

    def _begin(self, attempt: store.Attempt, retention: timedelta) -> store.Found:
        with self.engine.begin() as conn:
            return store.begin(
                conn, attempt, now=self.clock(), lease=self.lease, retention=retention
            )

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        """A database call on a worker thread: the event loop never waits on the database."""
        return await anyio.to_thread.run_sync(fn, *args)

    async def _plain(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request without a key: the app's transaction, if it asks for one, is settled when
        its response starts (nothing is kept for a retry)."""
        tx = IdempotentTransaction(self.engine, None)
        scope[SCOPE_KEY] = tx

        async def settling_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                await _settle_unkept(tx, int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, settling_send)
        finally:
            await tx.rollback()  # the app raised, or answered nothing: its writes are not kept

    async def _run(
        self, scope: Scope, receive: Receive, send: Send, attempt: store.Attempt, body: bytes
    ) -> None:
        tx = IdempotentTransaction(self.engine, attempt.key)
        scope[SCOPE_KEY] = tx
        captured = Capture(send, self.max_response, lambda status: _settle_unkept(tx, status))
        renewal = asyncio.create_task(self._renew(attempt))
        try:
            try:
                await self.app(scope, replaying(body, receive), captured.send)
            except BaseException:
                await tx.rollback()  # before the release: a retry must not find the writes
                await self._release(attempt)
                raise
            if tx.pending:
                # Settled before the renewal is awaited: a renewal may be blocked on a lock this
                # transaction holds (SQLite's write lock) until it ends.
                renewal.cancel()
                await self._settle(tx, attempt, captured, send)
                return
        finally:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
        await tx.rollback()  # nothing was begun: a late use of the transaction now raises
        response = captured.response()
        if response is None or captured.passed_through or transient_status(response.status):
            await self._release(attempt)  # nothing to keep: a retry runs the request again
        else:
            kept = self._kept(response)
            try:
                stored = await self._db(self._complete, attempt, kept)
            except SQLAlchemyError:
                log.exception("idempotency key %r: the response could not be stored", attempt.key)
                stored = True
            if not stored:
                log.warning(
                    "idempotency key %r: the lease ran out while the request ran; another "
                    "request may have run it too",
                    attempt.key,
                )
        await captured.flush()

    async def _settle(
        self, tx: IdempotentTransaction, attempt: store.Attempt, captured: Capture, send: Send
    ) -> None:
        """The app wrote through ``tx``: its writes and the key's completion commit together."""
        response = captured.response()
        if response is None or transient_status(response.status):
            await tx.rollback()
            await self._release(attempt)
            await captured.flush()
            return
        kept = self._kept(response)
        try:
            stored = await tx.commit(
                lambda conn: store.complete(conn, attempt, kept, now=self.clock())
            )
        except SQLAlchemyError:
            # rolled back, or (a COMMIT without an answer) perhaps committed: the release only
            # deletes a key still in progress under this request's lease, so a retry with the key
            # replays the response or runs the request once
            log.exception("idempotency key %r: the response could not be stored", attempt.key)
            await self._release(attempt)
            await answer(
                send,
                *problem(
                    503,
                    "Response not stored",
                    f"the request with {self.header_name} {attempt.key!r} could not be recorded; "
                    "retry with the same key",
                    key=attempt.key,
                ),
            )
            return
        if not stored:
            log.warning(
                "idempotency key %r: the lease ran out while the request ran and another request "
                "took the key over; this request's writes were rolled back",
                attempt.key,
            )
            await answer(
                send,
                *problem(
                    409,
                    "Request in progress",
                    f"a request with {self.header_name} {attempt.key!r} is being processed by "
                    "another attempt; retry later with the same key",
                    key=attempt.key,
                ),
            )
            return
        await captured.flush()

    def _kept(self, response: HeldResponse) -> store.StoredResponse:
        return store.StoredResponse(
            response.status,
            [(k, v) for k, v in response.headers if self._keeps(k)],
            response.body,
        )

    def _keeps(self, name: str) -> bool:
        lower = name.lower()
        if lower in NOT_STORED:
            return False
        return (
            self.stored_headers is None or lower in self.stored_headers or lower == "content-type"
        )

    def _complete(self, attempt: store.Attempt, response: store.StoredResponse) -> bool:
        with self.engine.begin() as conn:
            return store.complete(conn, attempt, response, now=self.clock())

    async def _release(self, attempt: store.Attempt) -> None:
        def release() -> None:
            with self.engine.begin() as conn:
                store.release(conn, attempt)

        try:
            with anyio.CancelScope(shield=True):
                await self._db(release)
        except SQLAlchemyError:
            log.exception("idempotency key %r could not be released", attempt.key)

    async def _renew(self, attempt: store.Attempt) -> None:
        every = self.lease.total_seconds() / 3

        def renew() -> bool:
            with self.engine.begin() as conn:
                return store.renew(conn, attempt, self.clock() + self.lease)

        while True:
            await anyio.sleep(every)
            try:
                await self._db(renew)
            except SQLAlchemyError:
                log.warning("idempotency key %r: the lease could not be renewed", attempt.key)


async def _settle_unkept(tx: IdempotentTransaction, status: int) -> None:
    """The transaction of a response that is not kept, as the response starts."""
    if transient_status(status):
        await tx.rollback()
    else:
        await tx.commit()
