"""The ASGI plumbing of the Idempotency-Key middleware: the request body read whole (and replayed
to the app), the app's response held back until it is stored, and the middleware's own answers
(RFC 9457 problem details)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import Message, Receive, Scope, Send

PROBLEM = "https://hookledger.dev/problems/idempotency-key"


def problem(
    status: int, title: str, detail: str, **extra: Any
) -> tuple[int, bytes, list[tuple[str, str]]]:
    """An RFC 9457 problem details answer: status, body, headers."""
    body = {"type": PROBLEM, "title": title, "status": status, "detail": detail, **extra}
    return status, json.dumps(body).encode(), [("content-type", "application/problem+json")]


def header_value(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def read_body(receive: Receive, limit: int) -> bytes | None:
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


def replaying(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class HeldResponse:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


class Capture:
    """Holds the app's response back until it is stored; one larger than ``limit`` is passed
    through as it comes (and not kept), after ``before_pass_through(status)``."""

    def __init__(
        self, send: Send, limit: int, before_pass_through: Callable[[int], Awaitable[None]]
    ) -> None:
        self._send = send
        self._limit = limit
        self._before_pass_through = before_pass_through
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
                await self._before_pass_through(int(self._start["status"]) if self._start else 500)
                await self.flush()

    def response(self) -> HeldResponse | None:
        if self._start is None:
            return None
        headers = [
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in self._start.get("headers", [])
        ]
        return HeldResponse(int(self._start["status"]), headers, b"".join(self._chunks))

    async def flush(self) -> None:
        held, self._held = self._held, []
        for message in held:
            await self._send(message)


async def answer(send: Send, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
    out = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    out.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})
