"""A receiving API for the outbox's tests, served over loopback: it honours ``Idempotency-Key`` as a
careful receiver does (one effect per key, a repeat answered like the first), and can be told to
fail a key's attempts (a status per attempt) or to answer a key's first attempt late (after the
effect: the publisher's read timeout, an ambiguous attempt)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from connectors.providers.standard.signature import verify_standard
from connectors.webhooks import SignatureError


@dataclass
class StandIn:
    statuses: dict[str, list[int]] = field(
        default_factory=dict
    )  # key -> answers, attempt by attempt
    late: dict[str, float] = field(default_factory=dict)  # key -> seconds, first attempt only
    secret: str | None = None  # verify the Standard Webhooks signature with it
    retry_after: str | None = None  # sent with a 429/503
    delay: float = 0.0  # every answer waits this long after the effect (a window for a crash)
    effects: dict[str, bytes] = field(default_factory=dict)  # one per key
    arrivals: Counter[str] = field(default_factory=Counter)
    headers: dict[str, dict[str, str]] = field(default_factory=dict)  # the last attempt's, per key
    order: list[str] = field(default_factory=list)  # keys in the order of their effect
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def receive(self, request: Request) -> JSONResponse:
        body = await request.body()
        if self.secret is not None:
            try:
                verify_standard(request.headers, body, [self.secret], now=time.time())
            except SignatureError as exc:
                self.refused += 1
                return JSONResponse({"error": str(exc)}, 401)
        key = request.headers.get("idempotency-key", "")
        with self._lock:
            self.arrivals[key] += 1
            n = self.arrivals[key]
            self.headers[key] = dict(request.headers)
            planned = self.statuses.get(key, [])
            status = planned[n - 1] if n <= len(planned) else 202
            if status < 300 and key not in self.effects:
                self.effects[key] = body
                self.order.append(key)
        if n == 1 and key in self.late:
            await asyncio.sleep(self.late[key])
        elif self.delay:
            await asyncio.sleep(self.delay)
        extra = {"Retry-After": self.retry_after} if self.retry_after and status >= 429 else {}
        return JSONResponse({"key": key, "attempt": n}, status, headers=extra)

    @property
    def app(self) -> Starlette:
        return Starlette(routes=[Route("/in", self.receive, methods=["POST"])])

    def wait_for(self, n: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.effects) < n:
            assert time.monotonic() < deadline, f"{len(self.effects)} of {n} effects"
            time.sleep(0.02)
