"""The demo's stand-in ops channel: where its ``[[notify]]`` webhook target posts. It verifies the
Standard Webhooks signature as a real receiver would, and keeps each message once by its
``webhook-id`` (a retried notification is the same message)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from connectors.standard_webhooks import verify_standard
from connectors.webhooks import SignatureError


@dataclass
class OpsChannel:
    secret: str
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)  # by webhook-id
    refused: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def receive(self, request: Request) -> JSONResponse:
        body = await request.body()
        try:
            verify_standard(request.headers, body, [self.secret], now=time.time())
        except SignatureError as exc:
            with self._lock:
                self.refused += 1
            return JSONResponse({"error": str(exc)}, status_code=401)
        with self._lock:
            self.messages.setdefault(request.headers["webhook-id"], json.loads(body))
        return JSONResponse({"ok": True})

    @property
    def routes(self) -> list[Route]:
        return [Route("/ops", self.receive, methods=["POST"])]

    def received(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.messages.values())
