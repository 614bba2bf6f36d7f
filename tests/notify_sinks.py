"""Local receivers for notifications, over loopback: an HTTP sink (Slack-compatible and generic
webhooks) that answers with the statuses it is told, and a real SMTP server (aiosmtpd)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.conftest import RunningServer, start_server


@dataclass
class HttpSink:
    """Records every POST; answers ``statuses`` in turn (then 200)."""

    statuses: list[int] = field(default_factory=list)
    received: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            body = await request.body()
            with self.lock:
                self.received.append((request.url.path, dict(request.headers), body))
                status = self.statuses.pop(0) if self.statuses else 200
            return Response("ok" if status < 300 else "no thanks", status_code=status)

        return Starlette(routes=[Route("/{path:path}", hook, methods=["POST"])])

    def bodies(self, path: str) -> list[bytes]:
        with self.lock:
            return [body for p, _, body in self.received if p == path]


@contextmanager
def http_sink(statuses: list[int] | None = None) -> Iterator[tuple[HttpSink, RunningServer]]:
    sink = HttpSink(list(statuses or []))
    server = start_server(sink.app())
    try:
        yield sink, server
    finally:
        server.stop()


class _Collect:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.envelopes: list[tuple[str, list[str]]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.original_content))
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 OK"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def smtp_sink(**controller: Any) -> Iterator[tuple[_Collect, int]]:
    """aiosmtpd on 127.0.0.1 (``controller``: its options, e.g. TLS and authentication)."""
    handler = _Collect()
    port = free_port()
    ctl = Controller(handler, hostname="127.0.0.1", port=port, **controller)
    ctl.start()
    try:
        yield handler, port
    finally:
        ctl.stop()
