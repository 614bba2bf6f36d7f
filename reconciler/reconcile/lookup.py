"""The look-up stage of a page: what the business tables hold of its objects, and the provider's
current state of those whose row differs from the page's snapshot.

A divergence is confirmed with the object's current state (``judge.to_confirm``): one request per
suspect object, at the provider's latency. Done by the run's one writer, those requests would stop
every page behind them, so the run looks pages up ahead of the writer on threads of its own
(:mod:`.pipeline`); :class:`LookUp` is what each of them runs. It reads each check's business rows
once for the page, on a read-only connection of its own (a few shared between the threads), asks
the provider for the suspects within the source's request budget, and hands the result to the judge
as one typed :class:`PageFacts`. Each object is asked once a scan.

An object the inbox holds a newer event of than the page's record is not asked at all
(:func:`newer_in_inbox`): its snapshot on this page is stale, and the page that lists the newer
event judges it. Without this, every object whose events fall on two pages (or, sliced, two slices)
was asked of the provider from the page with its older event.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, func, select

from connectors.base import Connector, Page, Record
from connectors.errors import ConnectorError
from reconciler.reconcile import judge
from reconciler.reconcile.business import BoundCheck, facts
from reconciler.reconcile.recent import NewestMet
from reconciler.reconcile.store import reader
from reconciler.storage.models import INBOX_EVENTS

log = logging.getLogger(__name__)

Current = Mapping[judge.ObjectKey, Mapping[str, Any] | None]


@dataclass(frozen=True)
class PageFacts:
    """What the look-up found for one page, by check: each check's business rows of the page's
    objects (``business[i]`` for ``checks[i]``), the provider's current state of the suspect objects,
    and the objects whose record on the page is older than an event of theirs in the inbox (judged
    on the page of the newer one)."""

    business: tuple[judge.BusinessFacts, ...] = ()
    current: Current = field(default_factory=dict)
    stale: frozenset[judge.ObjectKey] = frozenset()


NO_FACTS = PageFacts()  # a source without business checks looks nothing up


def newer_in_inbox(
    conn: Connection, source: str, records: Mapping[judge.ObjectKey, Record]
) -> set[judge.ObjectKey]:
    """Of these objects, those the inbox holds an event of newer than the record given."""
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
    return {key for key, at in dated.items() if (seen := newest.get(key)) and _aware(seen) > at}


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


# Current states a scan keeps, the oldest asked forgotten first: each is a whole object (a few kB).
# Pages looked up at once (LOOK_UP_AHEAD, a page's suspects each) ask fewer; a later page does not
# ask about an object met on a newer record (``recent``), so one forgotten is at most asked again.
STATES_REMEMBERED = 1_000


class CurrentStates:
    """The provider's current state of objects, each asked once while remembered (two pages looked
    up at once that both suspect an object share one request), up to ``at_once`` requests of a page
    together: a page of suspects takes about one latency, not one each (the source's budget still
    paces)."""

    def __init__(
        self, connector: Connector, at_once: int = 1, remembered: int = STATES_REMEMBERED
    ) -> None:
        self.connector, self.at_once, self.remembered = connector, at_once, remembered
        self._lock = threading.Lock()
        self._known: OrderedDict[judge.ObjectKey, Mapping[str, Any] | None] = OrderedDict()
        self._pending: dict[judge.ObjectKey, Future[Mapping[str, Any] | None]] = {}

    def ask(self, keys: Sequence[judge.ObjectKey]) -> dict[judge.ObjectKey, Any]:
        if len(keys) <= 1 or self.at_once <= 1:
            return {key: self._one(key) for key in keys}
        with ThreadPoolExecutor(min(len(keys), self.at_once), "current-state") as pool:
            return dict(zip(keys, pool.map(self._one, keys), strict=True))

    def _one(self, key: judge.ObjectKey) -> Mapping[str, Any] | None:
        with self._lock:
            if key in self._known:
                return self._known[key]
            asking = self._pending.get(key)
            if asking is None:
                answer: Future[Mapping[str, Any] | None] = Future()
                self._pending[key] = answer
        if asking is not None:  # another page is asking: its answer is this one's
            return asking.result()
        try:
            value = current_state(self.connector, key)
        except BaseException as exc:  # (a bug, an interrupt: the pages waiting on it get it too)
            with self._lock:
                del self._pending[key]
            answer.set_exception(exc)
            raise
        with self._lock:
            self._known[key] = value
            while len(self._known) > self.remembered:
                self._known.popitem(last=False)
            del self._pending[key]
        answer.set_result(value)
        return value


class LookUp:
    """A page's :class:`PageFacts` (see the module): :meth:`plan` on one thread in page order,
    what it returns on any. :meth:`close` closes its connections."""

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
        self.source_name = connector.source
        self.checks, self.engine, self.inbox_engine = checks, engine, inbox_engine
        self.cutoff, self.timeout = cutoff, timeout_seconds
        self.source = judge.Source(connector.capabilities, connector.retention)
        self.current = CurrentStates(connector, asks_at_once)
        self.met = NewestMet()  # what the pages planned so far listed (plan's thread only)
        self._free: queue.Queue[tuple[Connection, Connection]] = queue.Queue()
        self._limit = max(1, connections)
        self._opened: list[contextlib.ExitStack] = []
        self._lock = threading.Lock()

    def plan(self, page: Page) -> Callable[[], PageFacts]:
        """A page's look-up, planned in the order the source listed the pages, done by the returned
        call on any thread. An object an earlier page listed on a newer record is neither read nor
        asked about again: that page judged it (with its row, or it had none), and the judge
        does not judge it on an older record (``page_judge``)."""
        settled = judge.settled(page.records, self.cutoff)
        newest: list[dict[str, Record]] = []
        for index, check in enumerate(self.checks):
            latest = judge.latest_records(check.check, settled)
            newest.append(self.met.without_older(index, latest))
            self.met.remember(index, latest.values())
        return functools.partial(self._look_up, newest)

    def _look_up(self, newest: Sequence[Mapping[str, Record]]) -> PageFacts:
        business: list[judge.BusinessFacts] = []
        suspects: dict[judge.ObjectKey, Record] = {}
        with self._connection() as (biz, inbox):
            for check, latest in zip(self.checks, newest, strict=True):
                rows = facts(biz, check, sorted(latest))
                business.append(rows)
                for key in judge.to_confirm(check.check, latest, rows, self.source):
                    suspects.setdefault(key, latest[key[1]])
            stale = newer_in_inbox(inbox, self.source_name, suspects) if suspects else set()
            for conn in {biz, inbox}:
                if conn.in_transaction():
                    conn.rollback()  # no read transaction held while the provider answers
        current = self.current.ask([key for key in suspects if key not in stale])
        return PageFacts(tuple(business), current, frozenset(stale))

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
                biz = stack.enter_context(reader(self.engine, self.timeout))
                inbox = biz
                if self.inbox_engine is not self.engine:
                    inbox = stack.enter_context(reader(self.inbox_engine, self.timeout))
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
                log.debug("could not close a look-up connection", exc_info=True)
        self._opened.clear()
