"""Process-wide settings that a command applies once it has loaded what it runs with."""

from __future__ import annotations

import gc


def freeze_startup_objects() -> None:
    """Keep what start-up allocated out of the garbage collector's full collections.

    Modules, classes, functions and compiled regexes live as long as the process: ~80k objects once
    the CLI has imported SQLAlchemy, httpx and the rest. CPython's full (oldest-generation) collection
    traverses every tracked object, so each one that comes due during a scan costs ~35-45 ms here just
    to walk that start-up heap (bench/reconcile.py's arm: one of 45 ms inside a 10k-event run of
    ~0.35 s; at 1M the run took 24.7 instead of 26.7 s on PostgreSQL). ``gc.freeze`` moves the
    objects tracked so far to the permanent generation, which collections skip; what the run
    allocates afterwards is collected as before. Cyclic garbage left by start-up, if any, is kept rather than collected (a
    collection first would cost the same ~35 ms on every invocation). Called once, after their
    imports, by the commands that scan (``reconcile``, ``schedule``) when they run as the
    ``hookledger`` executable, never from a process that merely calls into the library."""
    gc.freeze()
