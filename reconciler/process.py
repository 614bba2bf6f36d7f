"""Process-wide settings that a command applies once it has loaded what it runs with."""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)

# descriptors a receiver needs beside its connections: the database's pool, logs, its socket
OPEN_FILES_HEADROOM = 256


def freeze_startup_objects() -> None:
    """Keep what start-up allocated out of the garbage collector's full collections.

    Modules, classes, functions and compiled regexes live as long as the process: tens of thousands
    of objects once the CLI has imported SQLAlchemy, httpx and the rest. CPython's full
    (oldest-generation) collection traverses every tracked object, so each one that comes due during a
    scan walks that start-up heap again (docs/benchmarks.md has what that cost). ``gc.freeze`` moves
    the objects tracked so far to the permanent generation, which collections skip; what the run
    allocates afterwards is collected as before. Cyclic garbage left by start-up, if any, is kept
    rather than collected (a collection first would cost as much on every invocation). Called once, after their
    imports, by the commands that scan (``reconcile``, ``schedule``) when they run as the
    ``hookledger`` executable, never from a process that merely calls into the library."""
    gc.freeze()


def lease_owner() -> str:
    """This process's name on what it holds (an event's lease, a run's lease, an outbox claim):
    host and pid, so an operator can find it, and a suffix of its own for each holder in it."""
    import os
    import socket
    import uuid

    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def open_files_to_ask(soft: int, hard: int, wanted: int) -> int | None:
    """The soft open-file limit to set so that ``wanted`` descriptors fit, or None to leave it.

    systemd and most shells start services at a soft limit of 1,024 under a far higher hard one:
    a receiver holding a thousand idle connections then stops accepting ("Too many open files").
    The soft limit may be raised up to the hard one without privilege.
    """
    infinite = hard < 0  # RLIM_INFINITY
    target = wanted if infinite else min(wanted, hard)
    return target if 0 <= soft < target else None


def raise_open_files(wanted: int) -> tuple[int, int]:
    """Raise this process's soft open-file limit toward ``wanted`` (POSIX; elsewhere nothing):
    the (soft, hard) limits in force afterwards."""
    try:
        import resource
    except ImportError:  # Windows: no such limit to raise
        return wanted, wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = open_files_to_ask(soft, hard, wanted)
    if target is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft, hard


def fit_open_files(max_connections: int) -> None:
    """Raise the open-file limit so ``max_connections`` fit, or say in one line why it cannot."""
    wanted = max_connections + OPEN_FILES_HEADROOM
    soft, hard = raise_open_files(wanted)
    if soft < wanted:
        log.warning(
            "open-file limit %d is below [receiver] max_connections + %d: past it the receiver "
            "stops accepting connections; raise LimitNOFILE (hard limit %d)",
            soft,
            OPEN_FILES_HEADROOM,
            hard,
        )
