"""The provider's current state of a page's suspect objects, asked for before the writer takes the
page.

A divergence is confirmed with the object's current state (``judge.to_confirm``): one request per
suspect object, at the provider's latency. Asked by the scan's one writer, those requests stop every
page behind them. A sliced scan's fetchers (``connectors.slices``) run :class:`Prefetch` on each
page they fetched instead: the page's business rows are read on a connection of its own (read-only,
a few shared between the fetchers), the objects whose row differs from the page's snapshot are asked
of the provider within the source's request budget, and the answers travel with the page
(``Page.prepared``). The writer judges as before; what it still lacks it asks itself. Each object is
asked once a scan.

An object the inbox holds a newer event of than the page's record is not asked at all
(:func:`newer_in_inbox`): its snapshot on this page is stale, and the page that lists the newer event
judges it. Without this, every object whose events fall on two pages (or, sliced, two slices) was
asked of the provider from the page with its older event.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, func, select

from connectors.base import Connector, Record
from connectors.errors import ConnectorError
from reconciler.reconcile import judge
from reconciler.reconcile.business import BoundCheck, facts
from reconciler.reconcile.store import read_only_session
from reconciler.storage.engine import SQLITE_BEGIN_OPTION
from reconciler.storage.models import INBOX_EVENTS

log = logging.getLogger(__name__)

Current = dict[judge.ObjectKey, Mapping[str, Any] | None]


@dataclass(frozen=True)
class Prepared:
    """What a fetcher found out for a page: objects' current states, and the objects whose record
    on the page is older than an event of theirs in the inbox (not judged on this page)."""

    current: Current
    stale: frozenset[judge.ObjectKey]


def newer_in_inbox(
    conn: Connection, source: str, records: Mapping[judge.ObjectKey, Record]
) -> set[judge.ObjectKey]:
    """Of these objects, those the inbox holds an event of newer than the record given (one query)."""
    dated = {k: r.occurred_at for k, r in records.items() if r.occurred_at is not None}
    if not dated:
        return set()
    events = INBOX_EVENTS
    by_type: dict[str, set[str]] = {}
    for object_type, object_id in dated:
        by_type.setdefault(object_type, set()).add(object_id)
    rows: list[Any] = []
    # one query per object type, so the (source, object_type, object_id) index finds the rows: on
    # the object id alone it read every event of the source, once a page
    for object_type, ids in by_type.items():
        # (no type: stored as NULL or ""; one query each, as an OR of the two skips the index)
        for of_type in (
            [events.c.object_type == object_type]
            if object_type
            else [events.c.object_type.is_(None), events.c.object_type == ""]
        ):
            rows += conn.execute(
                select(events.c.object_type, events.c.object_id, func.max(events.c.occurred_at))
                .where(events.c.source == source, of_type, events.c.object_id.in_(ids))
                .group_by(events.c.object_type, events.c.object_id)
            ).all()
    newest = {(t or "", o): at for t, o, at in rows if at is not None}
    out = set()
    for key, at in dated.items():
        seen = newest.get(key)
        if seen is not None and _aware(seen) > at:
            out.add(key)
    return out


def _reader(engine: Engine) -> Connection:
    """A connection that only reads: on SQLite its transactions begin deferred, so they read the
    last commit beside the scan's writer (WAL) instead of queueing for its write lock."""
    return engine.connect().execution_options(**{SQLITE_BEGIN_OPTION: "DEFERRED"})


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def current_state(connector: Connector, key: judge.ObjectKey) -> Mapping[str, Any] | None:
    """The object as the provider has it now; None where it cannot say (logged)."""
    object_type, object_id = key
    try:
        return connector.fetch_object(object_type, object_id)
    except ConnectorError as exc:  # (UnsupportedError too)
        log.info("cannot fetch %s %s for a divergence check: %s", object_type, object_id, exc)
        return None


def current_states(connector: Connector, keys: Sequence[judge.ObjectKey], at_once: int) -> Current:
    """The current state of each object, up to ``at_once`` asked together: one request per object
    at the provider's latency, so a page of suspects takes about one latency, not one each (the
    source's request budget still paces them)."""
    if len(keys) <= 1 or at_once <= 1:
        return {key: current_state(connector, key) for key in keys}
    with ThreadPoolExecutor(min(len(keys), at_once), thread_name_prefix="current-state") as pool:
        return dict(zip(keys, pool.map(lambda k: current_state(connector, k), keys), strict=True))


class Prefetch:
    """Called by fetcher threads with a page's records; returns the current state of its suspect
    objects (see the module). :meth:`close` closes its connections."""

    def __init__(
        self,
        connector: Connector,
        checks: Sequence[BoundCheck],
        engine: Engine,
        *,
        inbox_engine: Engine,
        cutoff: datetime,
        timeout_seconds: float,
        connections: int = 4,
        asks_at_once: int = 1,
    ) -> None:
        self.connector, self.checks, self.engine = connector, checks, engine
        self.asks_at_once = asks_at_once
        self.inbox_engine = inbox_engine
        self.cutoff, self.timeout = cutoff, timeout_seconds
        self.source = judge.Source(connector.capabilities, connector.retention)
        self._free: queue.Queue[tuple[Connection, Connection]] = queue.Queue()
        self._limit = max(1, connections)
        self._opened: list[contextlib.ExitStack] = []
        self._lock = threading.Lock()
        self._asked: Current = {}  # every object asked this scan, with its answer
        self._pending: dict[judge.ObjectKey, threading.Event] = {}

    def __call__(self, records: Sequence[Record]) -> Prepared:
        settled = judge.settled(records, self.cutoff)
        suspects: dict[judge.ObjectKey, Record] = {}
        with self._connection() as (biz, inbox):
            for check in self.checks:
                every = judge.latest_records(check.check, settled)
                if every:
                    rows = facts(biz, check, sorted(every))
                    for key in judge.to_confirm(check.check, every, rows, self.source):
                        suspects.setdefault(key, every[key[1]])
            stale = newer_in_inbox(inbox, self.connector.source, suspects) if suspects else set()
            for conn in {biz, inbox}:
                if conn.in_transaction():
                    conn.rollback()  # no read transaction held while the provider answers
        keys = [key for key in suspects if key not in stale]
        if len(keys) <= 1 or self.asks_at_once <= 1:
            current = {key: self._ask(key) for key in keys}
        else:
            with ThreadPoolExecutor(min(len(keys), self.asks_at_once)) as pool:
                current = dict(zip(keys, pool.map(self._ask, keys), strict=True))
        return Prepared(current, frozenset(stale))

    def _ask(self, key: judge.ObjectKey) -> Mapping[str, Any] | None:
        with self._lock:
            if key in self._asked:
                return self._asked[key]
            waiting = self._pending.get(key)
            if waiting is None:
                self._pending[key] = threading.Event()
        if waiting is not None:  # another fetcher is asking: its answer is this one's
            waiting.wait()
            with self._lock:
                return self._asked.get(key)
        value = current_state(self.connector, key)
        with self._lock:
            self._asked[key] = value
            self._pending.pop(key).set()
        return value

    @contextlib.contextmanager
    def _connection(self) -> Iterator[tuple[Connection, Connection]]:
        """A business tables' connection and an inbox one (the same where they share a database)."""
        try:
            pair = self._free.get_nowait()
        except queue.Empty:
            with self._lock:
                room = len(self._opened) < self._limit
                if room:
                    stack = contextlib.ExitStack()
                    self._opened.append(stack)
            if room:
                biz = stack.enter_context(_reader(self.engine))
                stack.enter_context(read_only_session(biz, self.timeout))
                inbox = biz
                if self.inbox_engine is not self.engine:
                    inbox = stack.enter_context(_reader(self.inbox_engine))
                pair = (biz, inbox)
            else:
                pair = self._free.get()
        try:
            yield pair
        finally:
            self._free.put(pair)

    def close(self) -> None:
        for stack in self._opened:
            try:
                stack.close()
            except Exception:  # a connection that cannot be given back is the pool's to drop
                log.debug("could not close a prefetch connection", exc_info=True)
        self._opened.clear()
