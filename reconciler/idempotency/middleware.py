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
path, query and body). The first request with a key runs the app; its response, once the app has
produced it whole, is stored before it is sent, and answers every repeat with the same key and
fingerprint (``Idempotent-Replayed: true``) without running the app again. A repeat that arrives
while the first still runs waits up to ``wait_seconds`` for it, then gets the stored response, or
``409``. The same key with another fingerprint gets ``422`` and the app does not run. A response
that asks to be retried (408, 429, 5xx) or an exception keeps nothing: the key is released and a
retry runs the request again. A request whose process died leaves its key in progress until its
lease (renewed while the app runs) runs out; then a retry may take it over. Keys are forgotten after
``retention`` (7 days: the longest provider retry window plus margin) and ``hookledger prune``
deletes them. Errors are RFC 9457 problem details (``application/problem+json``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
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
from reconciler.idempotency.keys import (
    NO_POLICY,
    RoutePolicy,
    canonical_body,
    fingerprint,
    parse_key,
    policy_for,
)
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
PROBLEM = "https://hookledger.dev/problems/idempotency-key"


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


def problem(
    status: int, title: str, detail: str, **extra: Any
) -> tuple[int, bytes, list[tuple[str, str]]]:
    """An RFC 9457 problem details answer: status, body, headers."""
    body = {"type": PROBLEM, "title": title, "status": status, "detail": detail, **extra}
    return status, json.dumps(body).encode(), [("content-type", "application/problem+json")]


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
        if scope["type"] != "http" or scope["method"] not in self.methods:
            await self.app(scope, receive, send)
            return
        policy = policy_for(self.policies, self.default_policy, scope["method"], scope["path"])
        raw = [v for k, v in scope["headers"] if k == self.header]
        if not raw:
            if policy.required:
                await _answer(
                    send,
                    *problem(
                        400,
                        "Idempotency key required",
                        f"{scope['method']} {scope['path']} needs an {self.header_name} header "
                        '(a unique string, e.g. Idempotency-Key: "<a UUID>")',
                    ),
                )
                return
            await self.app(scope, receive, send)
            return
        key = parse_key(raw)
        if key is None:
            await _answer(
                send,
                *problem(
                    400,
                    "Invalid idempotency key",
                    f"{self.header_name} must appear once and be 1-255 visible ASCII characters "
                    '(a structured-field string, "…", or the bare key)',
                ),
            )
            return
        body = await _read_body(receive, self.max_body)
        if body is None:
            await _answer(
                send,
                *problem(
                    413,
                    "Request body too large",
                    f"a request with {self.header_name} may carry at most {self.max_body} bytes",
                ),
            )
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
                body
                if policy.fingerprint == "bytes"
                else canonical_body(body, _header(scope, b"content-type")),
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
            await _answer(send, r.status, r.body, headers)
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
            await _answer(
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
            await _answer(
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

    async def _run(
        self, scope: Scope, receive: Receive, send: Send, attempt: store.Attempt, body: bytes
    ) -> None:
        captured = _Capture(send, self.max_response)
        renewal = asyncio.create_task(self._renew(attempt))
        try:
            await self.app(scope, _replaying(body, receive), captured.send)
        except BaseException:
            await self._release(attempt)
            raise
        finally:
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
        response = captured.response()
        if response is None or captured.passed_through or transient_status(response.status):
            await self._release(attempt)  # nothing to keep: a retry runs the request again
        else:
            kept = store.StoredResponse(
                response.status,
                [(k, v) for k, v in response.headers if self._keeps(k)],
                response.body,
            )
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


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None when it is over ``limit``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away: the app sees an empty body and a disconnect
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class _Response:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


class _Capture:
    """Holds the app's response back until it is stored; one larger than ``limit`` is passed
    through as it comes (and not kept)."""

    def __init__(self, send: Send, limit: int) -> None:
        self._send = send
        self._limit = limit
        self._start: Message | None = None
        self._chunks: list[bytes] = []
        self._size = 0
        self._held: list[Message] = []
        self.passed_through = False

    async def send(self, message: Message) -> None:
        if self.passed_through:
            await self._send(message)
            return
        self._held.append(message)
        if message["type"] == "http.response.start":
            self._start = message
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            self._chunks.append(chunk)
            self._size += len(chunk)
            if self._size > self._limit:
                self.passed_through = True
                await self.flush()

    def response(self) -> _Response | None:
        if self._start is None:
            return None
        headers = [
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in self._start.get("headers", [])
        ]
        return _Response(int(self._start["status"]), headers, b"".join(self._chunks))

    async def flush(self) -> None:
        held, self._held = self._held, []
        for message in held:
            await self._send(message)


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
    out = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    out.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})
