"""A worker process of ``hookledger worker``: applies events until stopped, telling its supervisor
(``inbox.supervisor``) over a pipe when each attempt starts and ends and how it ended.

It is started with ``multiprocessing``'s ``spawn``, so it imports ``[worker] handlers`` itself and
configures logging as the command does. SIGINT is the supervisor's to act on; SIGTERM asks it to
finish its attempt and give the rest of its batch back. It does not renew its leases: the
supervisor does, and stops when the attempt runs past ``handler_timeout_seconds``. A process whose
supervisor died stops at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection as Pipe
from typing import TYPE_CHECKING

from reconciler.config import Settings
from reconciler.storage.models import EventStatus
from reconciler.storage.types import utcnow

if TYPE_CHECKING:
    from reconciler.inbox.handlers import Event
    from reconciler.inbox.worker import WorkerStats


class _Reporter:
    """In a worker process: tells the supervisor of attempts and outcomes (and stands in for
    ``WorkerMetrics``: the supervisor serves them)."""

    def __init__(self, pipe: Pipe) -> None:
        self.pipe = pipe
        self.stats: WorkerStats | None = None
        self.write_lock = _LockReporter(pipe)

    def attempt(self, event: Event | None) -> None:
        if event is None:
            self.pipe.send(("end",))
        else:
            self.pipe.send(("start", event.id, time.monotonic(), utcnow()))

    def observe(self, source: str, status: EventStatus | None, seconds: float) -> None:
        if self.stats is not None:  # so far: a killed process's count is not lost
            self.pipe.send(("stats", self.stats.claimed, dict(self.stats.outcomes)))
        self.pipe.send(("event", source, status.value if status else None, seconds))


class _LockReporter:
    def __init__(self, pipe: Pipe) -> None:
        self.pipe = pipe

    def observe(self, source: str, seconds: float) -> None:
        self.pipe.send(("lock", source, seconds))


def worker_process_main(
    settings: Settings, owner: str, pipe: Pipe, once: bool, parent: int
) -> None:
    """A worker process: apply events until stopped (SIGTERM) or, ``once``, until none is due."""
    from reconciler.inbox.handlers import load_handler_modules
    from reconciler.inbox.worker import Worker
    from reconciler.logs import configure_logging
    from reconciler.storage.engine import make_engine

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the supervisor, which decides
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    configure_logging(settings.logging.level, settings.logging.format)
    threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()
    load_handler_modules(settings.worker.handlers, settings.worker.import_paths)
    db = settings.database
    engine = make_engine(db.url, echo=db.echo, connect_timeout=db.connect_timeout_seconds)
    reporter = _Reporter(pipe)
    worker = Worker(
        engine,
        settings,
        worker_id=owner,
        renew_leases=False,
        on_attempt=reporter.attempt,
        metrics=reporter,  # type: ignore[arg-type]
    )
    reporter.stats = worker.stats
    try:
        if once:
            worker.drain()
        else:
            worker.run(stop)
    finally:
        pipe.send(("stats", worker.stats.claimed, dict(worker.stats.outcomes)))
        worker.close()
        engine.dispose()


def _exit_with(parent: int) -> None:
    """A worker whose supervisor died stops at once: nobody renews its leases any more. Linux
    kills it with the supervisor (PR_SET_PDEATHSIG); elsewhere it notices within half a second."""
    _die_with_parent()
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    import contextlib
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # the polling still stops it
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
