"""Handlers for tests/integration/test_applied_once.py, run by real ``hookledger worker`` processes.

Not idempotent on purpose: each event adds its amount to its account's balance, so a second
application shows as a doubled balance. ``HL_PLAN`` (a JSON file) says, per event id, where the
first attempt dies (``kill``: ``before`` the write, ``after_business`` commit, ``after_processed``
commit, each by SIGKILL of the worker process) or how long the handler sleeps (``sleep``). Every
run of the handler appends a line to ``HL_RUNS`` (``event pid attempt``), and a process about to die
a ``DIES event pid point`` line.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, event
from sqlalchemy.pool import Pool

from reconciler.inbox.handlers import Event, handler
from reconciler.storage.dialect import insert_for
from tests.balances import balances

_plan: dict[str, dict[str, Any]] | None = None
_armed: set[int] = set()  # DB-API connections whose return to the pool kills this process


def plan() -> dict[str, dict[str, Any]]:
    global _plan
    if _plan is None:
        path = os.environ.get("HL_PLAN")
        _plan = json.loads(Path(path).read_text()) if path else {}
    return _plan


@event.listens_for(Pool, "checkin")
def _die_once_committed(dbapi_connection: Any, _record: Any) -> None:
    # A connection goes back to the pool once its transaction committed: the moment to die "after
    # the commit" without hooking into hookledger.
    if id(dbapi_connection) in _armed:
        os.kill(os.getpid(), signal.SIGKILL)


def _arm(conn: Connection) -> None:
    _armed.add(id(conn.connection.dbapi_connection))


def _log(line: str) -> None:
    with Path(os.environ["HL_RUNS"]).open("a") as runs:
        runs.write(line + "\n")


@handler("stripe", "*")
def add_to_balance(ev: Event, conn: Connection) -> None:
    step = plan().get(ev.event_id, {})
    _log(f"{ev.event_id} {os.getpid()} {ev.attempt}")
    first = ev.attempt == 1
    if step.get("kill") and first:
        _log(f"DIES {ev.event_id} {os.getpid()} {step['kill']}")
    if step.get("kill") == "before" and first:
        os.kill(os.getpid(), signal.SIGKILL)
    if step.get("sleep"):
        time.sleep(float(step["sleep"]))
    with ev.business.begin() as biz:
        stmt = insert_for(biz, balances).values(account=ev.event_id, amount=100)
        biz.execute(
            stmt.on_conflict_do_update(
                index_elements=["account"],
                set_={"amount": balances.c.amount + stmt.excluded.amount},
            )
        )
        if first and step.get("kill") == "after_business":
            _arm(biz)  # separate business database: dies after its commit, before the inbox's
        if first and step.get("kill") == "after_processed":
            _arm(conn)  # dies after the inbox's commit (the processed mark)
