"""How long a handler's transaction holds SQLite's write lock, and a warning when it is too long.

SQLite has one writer: from a transaction's first write to its commit, the receiver cannot store a
delivery. A handler that writes (``event.outbox.add``, a business row) and then waits (an HTTP call,
a sleep) holds every provider's acknowledgement for that wait, past GitHub's 10 s timeout if long
enough. The watch times first write to commit, exports it, and warns once per handler that passes
``[worker] sqlite_lock_warn_seconds``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, event

log = logging.getLogger(__name__)

WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER"})


def is_write(statement: str) -> bool:
    """Whether a statement takes SQLite's write lock (its first keyword says)."""
    head = statement.lstrip().split(None, 1)
    return bool(head) and head[0].upper() in WRITES


def handler_name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


class WriteLockWatch:
    def __init__(
        self,
        warn_seconds: float,
        observe: Callable[[str, float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.warn_seconds = warn_seconds
        self.observe = observe
        self.clock = clock
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    @contextmanager
    def watch(self, source: str, fn: Callable[..., Any]) -> Iterator[Callable[[Connection], None]]:
        """Around a handler's transaction, commit included: yields ``listen(conn)``, to call once the
        transaction's connection is open."""
        first: list[float] = []
        listening: list[Connection] = []

        def on_execute(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if not first and is_write(statement):
                first.append(self.clock())

        def listen(conn: Connection) -> None:
            event.listen(conn, "before_cursor_execute", on_execute)
            listening.append(conn)

        try:
            yield listen
        finally:
            for conn in listening:
                event.remove(conn, "before_cursor_execute", on_execute)
        if first:
            self.record(source, handler_name(fn), self.clock() - first[0])

    def record(self, source: str, handler: str, held: float) -> None:
        if self.observe is not None:
            self.observe(source, held)
        if held <= self.warn_seconds:
            return
        with self._lock:
            if handler in self._warned:
                return
            self._warned.add(handler)
        log.warning(
            "handler %s held SQLite's write lock for %.1f s (over [worker] sqlite_lock_warn_seconds"
            " = %g): the receiver could not store deliveries meanwhile; write after any waiting, "
            "or use PostgreSQL (docs/operations.md)",
            handler,
            held,
            self.warn_seconds,
            extra={"source": source},
        )
