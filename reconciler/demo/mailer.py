"""The demo's stand-in "mailer": where the demo application's receipts go through the outbox.

It behaves as a careful receiving API does: it verifies the Standard Webhooks signature, keeps one
receipt per ``Idempotency-Key`` (a repeat of a key is answered as the first was, nothing sent twice),
and, as real services do now and then, fails: some keys' first attempt gets ``503``, and a few are
accepted but answered too late (the publisher's read timeout: an ambiguous attempt, retried with the
same key). Which keys is decided by the key and the seed, so a run is repeatable.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from connectors.standard_webhooks import verify_standard
from connectors.webhooks import SignatureError

UNAVAILABLE_ONE_IN = 6  # a key's first attempt answered 503
LATE_ONE_IN = 40  # a key's first attempt accepted, answered after the publisher stopped waiting


@dataclass
class Mailer:
    secret: str
    seed: int = 1
    late_seconds: float = 1.5  # longer than the demo target's timeout_seconds
    receipts: dict[str, bytes] = field(default_factory=dict)  # one per key: what was "mailed"
    arrivals: Counter[str] = field(default_factory=Counter)  # attempts that reached us, per key
    refused: int = 0  # bad or missing signatures
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _roll(self, key: str) -> int:
        return int(hashlib.sha256(f"{self.seed}:{key}".encode()).hexdigest()[:8], 16)

    async def receive(self, request: Request) -> JSONResponse:
        body = await request.body()
        try:
            verify_standard(request.headers, body, [self.secret], now=time.time())
        except SignatureError as exc:
            self.refused += 1
            return JSONResponse({"error": str(exc)}, status_code=401)
        key = request.headers.get("idempotency-key")
        if not key:
            return JSONResponse({"error": "Idempotency-Key is required"}, status_code=400)
        with self._lock:
            self.arrivals[key] += 1
            first = self.arrivals[key] == 1
            if first and self._roll(key) % UNAVAILABLE_ONE_IN == 0:
                return JSONResponse({"error": "mailer busy, try again"}, status_code=503)
            repeat = key in self.receipts
            self.receipts.setdefault(key, body)
        if first and self._roll(key) % LATE_ONE_IN == 1:
            await asyncio.sleep(self.late_seconds)  # accepted, but the answer comes too late
        return JSONResponse({"status": "duplicate" if repeat else "queued", "key": key}, 202)

    @property
    def app(self) -> Starlette:
        return Starlette(routes=self.routes)

    @property
    def routes(self) -> list[Route]:
        return [Route("/receipts", self.receive, methods=["POST"])]

    def check(self, expected_keys: set[str]) -> list[str]:
        """What differs from one receipt per expected key, and one per invoice (lines; empty
        when exact)."""
        got = set(self.receipts)
        out = [f"receipt missing at the mailer: {k}" for k in sorted(expected_keys - got)]
        out += [f"receipt the mailer should not have: {k}" for k in sorted(got - expected_keys)]
        per_invoice = Counter(json.loads(body).get("invoice") for body in self.receipts.values())
        out += [f"invoice {i} got {n} receipts" for i, n in sorted(per_invoice.items()) if n > 1]
        if self.refused:
            out.append(f"the mailer refused {self.refused} badly signed deliveries")
        return out

    @property
    def retried(self) -> int:
        """Keys that reached the mailer more than once (503s, late answers): each mailed once."""
        return sum(1 for n in self.arrivals.values() if n > 1)
