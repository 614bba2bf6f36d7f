"""``hookledger worker``: worker processes under a supervisor, so a hung handler is abandoned and
SIGTERM always stops.

Python cannot stop a thread, so each worker runs in a process of its own, as Celery's prefork pool
and RQ's work-horse do (a job past Celery's hard ``time_limit`` has its process killed and
replaced). The processes live on from event to event (one per event, as RQ forks, would pay the
interpreter's start-up and a database pool on every event); they are started with
``multiprocessing``'s ``spawn``: a fresh interpreter that imports ``[worker] handlers`` itself and
inherits no thread, lock or connection of this one. The supervisor, in the command's own process:

- renews the leases of what each process holds, every third of ``lease_seconds`` (``inbox.leases``),
  so a handler slower than the lease keeps its event and no second worker runs it meanwhile;
- kills a process whose attempt runs past ``handler_timeout_seconds``: the database rolls its
  transactions back; the attempt is recorded as a transient ``handler_timeout`` failure, a hang
  (dead with class ``hung`` at ``max_hangs``, ``inbox.abandon``), the process's other claimed events
  are given back and another process takes its place;
- records a process that died during an attempt (a crash, ``os._exit``, the OOM killer) the same way;
- on SIGTERM or SIGINT asks each process to finish its attempt, and kills those still running after
  ``shutdown_grace_seconds``: their events are given back, due at once.

A process tells the supervisor when an attempt starts and ends, and its outcomes (for the command's
summary and ``/metrics``), over a pipe of its own. A process whose supervisor died exits.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing.connection import Connection as Pipe
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from reconciler.config import Settings
from reconciler.inbox.abandon import abandon, release_owner
from reconciler.inbox.leases import LeaseKeeper
from reconciler.inbox.worker import WorkerStats
from reconciler.inbox.worker_process import worker_process_main
from reconciler.process import lease_owner
from reconciler.storage.models import EventStatus
from reconciler.storage.types import utcnow

if TYPE_CHECKING:
    from reconciler.inbox.worker_metrics import WorkerMetrics

log = logging.getLogger(__name__)

TICK_SECONDS = 0.2  # how often the supervisor looks at its processes


@dataclass
class _Running:
    event: int  # the inbox row's id
    since: float  # time.monotonic() when the attempt started
    started_at: datetime


@dataclass
class _Child:
    process: BaseProcess
    owner: str
    pipe: Pipe
    running: _Running | None = None
    stats: WorkerStats = field(default_factory=WorkerStats)
    killed: bool = False  # by the supervisor: a timeout or the end of the shutdown grace


class Supervisor:
    """``processes`` worker processes (``[worker] concurrency``) applying events from ``engine``'s
    database with ``settings``; ``drain`` until nothing is due (``--once``) or ``run`` until
    stopped."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        processes: int,
        *,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.cfg = settings.worker
        self.processes = processes
        self.metrics = metrics
        self._own = WorkerStats()  # the supervisor's own records (abandoned attempts)
        self._children: list[_Child] = []
        self._finished: list[_Child] = []
        self._waiting: list[float] = []  # when processes that died at start-up are started again
        self.failures = 0  # processes that died outside any attempt, in a row (the backoff)
        self.died_outside = 0  # and in all (--once fails when any did)
        self._keeper = LeaseKeeper(engine, self.cfg.lease_seconds)
        self._rng = random.Random()
        self._context = multiprocessing.get_context("spawn")

    # -- the Loop protocol (reconciler.cli.common.run_loops) ---------------------------------------

    def drain(self) -> int:
        self._supervise(threading.Event(), once=True)
        return self.stats.claimed

    def run(self, stop: threading.Event) -> None:
        self._supervise(stop, once=False)

    def close(self) -> None:
        for child in self._children:
            _kill(child)
        self._children = []

    @property
    def stats(self) -> WorkerStats:
        """What every process claimed and how each attempt ended, with the supervisor's records."""
        total = WorkerStats(claimed=self._own.claimed, outcomes=dict(self._own.outcomes))
        for child in [*self._finished, *self._children]:
            total.claimed += child.stats.claimed
            for key, n in child.stats.outcomes.items():
                total.outcomes[key] = total.outcomes.get(key, 0) + n
        return total

    # -- supervising -------------------------------------------------------------------------------

    def _supervise(self, stop: threading.Event, *, once: bool) -> None:
        self._children = [self._spawn(once) for _ in range(self.processes)]
        deadline: float | None = None  # of the shutdown grace, once stop is set
        with self._keeper.holding(self._held):
            while self._children or (self._waiting and deadline is None):
                self._read(TICK_SECONDS)
                if self._waiting and self._waiting[0] <= time.monotonic() and deadline is None:
                    self._waiting.pop(0)
                    self._children.append(self._spawn(once))
                if stop.is_set() and deadline is None:
                    deadline = time.monotonic() + self.cfg.shutdown_grace_seconds
                    for child in self._children:
                        _terminate(child)
                for child in list(self._children):
                    self._check(child, once=once, stopping=deadline is not None)
                if deadline is not None and time.monotonic() >= deadline:
                    for child in self._children:
                        child.killed = True
                        _kill(child)

    def _held(self) -> list[str]:
        """The owners whose leases are renewed: every process but one past its timeout."""
        limit = self.cfg.handler_timeout_seconds
        now = time.monotonic()
        return [
            c.owner
            for c in list(self._children)
            if c.running is None or now - c.running.since <= limit
        ]

    def _spawn(self, once: bool) -> _Child:
        owner = lease_owner()
        ours, theirs = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=worker_process_main,
            args=(self.settings, owner, theirs, once, os.getpid()),
            name=f"hookledger-worker-{owner}",
            # not daemonic: a handler may start processes of its own (multiprocessing refuses
            # that in a daemonic one); the supervisor always ends its processes itself
            daemon=False,
        )
        process.start()
        theirs.close()
        return _Child(process, owner, ours)

    def _read(self, timeout: float) -> None:
        pipes = {c.pipe: c for c in self._children}
        if not pipes:
            time.sleep(timeout)
            return
        for pipe in wait(list(pipes), timeout):
            child = pipes[pipe]  # type: ignore[index]
            try:
                while child.pipe.poll():
                    self._message(child, child.pipe.recv())
            except (EOFError, OSError):
                pass  # the process ended: _check sees it

    def _message(self, child: _Child, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "start":
            child.running = _Running(message[1], message[2], message[3])
        elif kind == "end":
            child.running = None
            self.failures = 0
        elif kind == "stats":
            child.stats = WorkerStats(message[1], message[2])
        elif kind == "event" and self.metrics is not None:
            status = EventStatus(message[2]) if message[2] else None
            self.metrics.observe(message[1], status, message[3])
        elif kind == "lock" and self.metrics is not None:
            self.metrics.write_lock.observe(message[1], message[2])

    def _check(self, child: _Child, *, once: bool, stopping: bool) -> None:
        running = child.running
        limit = self.cfg.handler_timeout_seconds
        if running is not None and not stopping and time.monotonic() - running.since > limit:
            child.killed = True
            _kill(child)
            self._read_rest(child)
            self._abandon(
                child,
                running,
                f"handler_timeout: the attempt ran past [worker] handler_timeout_seconds "
                f"({limit:g} s) and was abandoned (its process killed, its transactions rolled "
                "back)",
            )
            self._replace(child, once)
            return
        if child.process.is_alive():
            return
        child.process.join()
        self._read_rest(child)
        code = child.process.exitcode
        during = child.running is not None
        if during and not stopping and not child.killed:
            assert child.running is not None
            log.warning(
                "worker process %s exited with code %s during an attempt; starting another",
                child.process.pid,
                code,
            )
            self._abandon(
                child,
                child.running,
                f"the worker process running the attempt exited (code {code}) before it ended",
            )
        else:
            self._release(child)
        if stopping or (once and code == 0):
            self._retire(child)
        elif during or child.killed or code == 0:
            self._replace(child, once)
        else:
            # it died outside any attempt (the database unreachable, a handler module that fails
            # at import): starting another at once would only fail again
            self._retire(child)
            self.failures += 1
            self.died_outside += 1
            if once:
                log.error("a worker process exited with code %s outside any attempt", code)
            else:
                delay = min(30.0, 2.0**self.failures)
                log.warning(
                    "a worker process exited with code %s outside any attempt; another starts "
                    "in %g s",
                    code,
                    delay,
                )
                self._waiting.append(time.monotonic() + delay)

    def _read_rest(self, child: _Child) -> None:
        """What a process that ended had sent: its last outcomes and whether an attempt ended."""
        child.process.join(timeout=5)
        try:
            while child.pipe.poll():
                self._message(child, child.pipe.recv())
        except (EOFError, OSError):
            pass

    def _abandon(self, child: _Child, running: _Running, reason: str) -> None:
        try:
            with self.engine.begin() as conn:
                done = abandon(
                    conn,
                    running.event,
                    child.owner,
                    reason=reason,
                    started_at=running.started_at,
                    now=utcnow(),
                    cfg=self.cfg,
                    rng=self._rng,
                )
                release_owner(conn, child.owner, utcnow())
        except Exception:
            log.exception("could not record an abandoned attempt; its lease will run out instead")
            return
        if done is None:
            return
        self._own.add(done.status)
        log.warning(
            "event %s after attempt %d: %s",
            done.status.value,
            done.attempt,
            reason,
            extra={"source": done.source, "event_id": done.event_id, "hangs": done.hangs},
        )

    def _release(self, child: _Child) -> None:
        try:
            with self.engine.begin() as conn:
                release_owner(conn, child.owner, utcnow())
        except Exception:
            log.exception("could not give back a worker's events; their leases will run out")

    def _retire(self, child: _Child) -> None:
        child.pipe.close()
        self._children.remove(child)
        self._finished.append(child)

    def _replace(self, child: _Child, once: bool) -> None:
        self._retire(child)
        self._children.append(self._spawn(once))


def _terminate(child: _Child) -> None:
    if child.process.is_alive():
        child.process.terminate()  # SIGTERM: finish the attempt, give the rest back


def _kill(child: _Child) -> None:
    if child.process.is_alive():
        child.process.kill()
        child.process.join(timeout=5)
