"""Process-wide settings that a command applies once it has loaded what it runs with."""

from __future__ import annotations

import gc


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
