"""The receiver's guard at the edge: at most ``limit`` webhook requests at once (an ASGI middleware).

A provider that finds the receiver full gets ``503`` with ``Retry-After``, the answer every provider
retries, instead of a connection that hangs; health checks and metrics are never turned away, so a
busy receiver is not taken for a dead one. Half-sent bodies are the receiver's own business
(``[receiver] body_timeout_seconds``); this bounds how many of them can be held at once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

RETRY_AFTER_SECONDS = 1
LIMITED_PREFIX = "/webhooks/"


class ConcurrencyLimit:
    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        on_refused: Callable[[], None] | None = None,
        exempt: frozenset[str] = frozenset(),
    ):
        self.app, self.limit, self.on_refused = app, limit, on_refused
        # paths with a bounded queue of their own (sources confirmed through the provider's API)
        self.exempt = exempt
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not path.startswith(LIMITED_PREFIX) or path in self.exempt:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            if self.on_refused is not None:
                self.on_refused()
            await _busy(send, self.limit)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


async def _busy(send: Send, limit: int) -> None:
    body = json.dumps(
        {"status": "error", "reason": f"receiver busy: {limit} requests in progress"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
