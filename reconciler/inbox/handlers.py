"""Event handlers: Python functions registered per source and event type.

A handler receives the :class:`Event` and the SQLAlchemy ``Connection`` of the transaction that also
marks the event processed, so business rows in the same database commit or roll back with the status
update. ``event.business`` reaches ``[business] url``: its writes commit with the event's applied
mark (``reconciler.inbox.applied``), so no crash and no second runner applies an event twice. Raise :class:`~reconciler.errors.TransientError` to retry later, :class:`PermanentError` to
dead-letter, :class:`AmbiguousError` when a call went out and no answer came. Register with the
decorator in a module listed in ``[worker] handlers``::

    from reconciler.inbox.handlers import Verdict, handler, upsert_if_newer

    def charged(event, conn):  # asked before a retry of an ambiguous attempt
        return Verdict.DONE if crm.has_charge(event.event_id) else Verdict.NOT_DONE

    @handler("payments", "invoice.paid", verify=charged)  # a source's name, an event type
    def invoice_paid(event, conn):
        ...
        event.outbox.add("crm", {"invoice": ...})  # sent after this transaction commits

A call to another system goes through ``event.outbox`` (``reconciler.outbox``): written with the
transaction that marks the event processed, sent by the publisher with its Idempotency-Key.
"""

from __future__ import annotations

import enum
import importlib
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from sqlalchemy import Connection, Engine, Table

from connectors.parsing import decode_payload
from reconciler.errors import ConfigError
from reconciler.inbox.applied import BusinessSide
from reconciler.logs import escape_control
from reconciler.outbox.writer import Outbox
from reconciler.storage.dialect import insert_for


class Business:
    """The application's business database as hookledger hands it to a handler: ``[business] url``
    (the inbox's own database when that is unset). Handlers write through it rather than building
    their own engine, so that ``hookledger drill`` can hand them a scratch database instead::

        with event.business.begin() as biz:
            upsert_if_newer(biz, invoices, {...}, key=["id"], version="version")

    During an attempt every block is a savepoint of the attempt's one business transaction, which
    commits with the event's applied mark after the handler returns (``reconciler.inbox.applied``):
    a crash or a second runner can never apply the event twice. The inbox's own database: that
    transaction is ``conn``'s.
    """

    def __init__(self, engine: Engine, side: BusinessSide | None = None) -> None:
        self.engine = engine
        self._side = side

    def for_attempt(self, side: BusinessSide) -> Business:
        return Business(self.engine, side)

    def begin(self) -> AbstractContextManager[Connection]:
        """A block of the attempt's business transaction (committed with the applied mark once
        the handler returned; rolled back with the attempt). Outside an attempt: a transaction of
        its own."""
        if self._side is None:
            return self.engine.begin()
        return self._side.block()

    def connect(self) -> AbstractContextManager[Connection]:
        """As :meth:`begin`: reads see the attempt's own writes."""
        if self._side is None:
            return self.engine.connect()
        return self._side.block()


@dataclass(frozen=True)
class Event:
    """What a handler sees of an inbox event (a value, not an ORM object)."""

    id: int
    source: str
    event_id: str
    event_type: str | None
    object_type: str | None
    object_id: str | None
    occurred_at: datetime | None
    body: bytes
    content_type: str | None
    headers: Mapping[str, str]
    attempt: int
    correlation_id: str
    origin: str = "webhook"
    error_class: str | None = None  # the previous attempt's failure class, if it failed
    replay: int = 0  # how many times an operator replayed it (its applied mark is per round)
    hangs: int = 0  # attempts that never came back (timed out, or their worker died)
    # the business database (set by the worker and the drill)
    business_db: Business | None = field(default=None, compare=False, repr=False)
    # outgoing messages written with the handler's transaction (set by the worker and the drill)
    outbox_writer: Outbox | None = field(default=None, compare=False, repr=False)
    # a thin notification's object as the provider holds it now, fetched before the handler ran
    # (Stripe's v2 events); None for a delivery that is its own snapshot. event.payload stays the
    # notification as it arrived.
    current: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def business(self) -> Business:
        if self.business_db is None:
            raise ConfigError("this event was not handed a business database (worker or drill)")
        return self.business_db

    @property
    def outbox(self) -> Outbox:
        """``event.outbox.add(target, payload, key=None, headers=None)``: an outgoing message
        committed with this handler's transaction (``reconciler.outbox.writer``)."""
        if self.outbox_writer is None:
            raise ConfigError("this event was not handed an outbox (worker or drill)")
        return self.outbox_writer

    @property
    def object_key(self) -> str | None:
        """The event's object as one key (``source:type:id``): what orders its outgoing messages."""
        if not self.object_id:
            return None
        return f"{self.source}:{self.object_type or ''}:{self.object_id}"

    @cached_property
    def payload(self) -> Any:
        """The body's document: its JSON, or a form body's fields (a dict; a list where a field
        repeats)."""
        return decode_payload(self.body, self.content_type)


Handler = Callable[[Event, Connection], None]


class Verdict(enum.StrEnum):
    """What a handler's ``verify`` function found of an earlier ambiguous attempt's effect."""

    DONE = "done"  # it took effect: the event is processed without running the handler again
    NOT_DONE = "not_done"  # it did not: the handler runs again
    UNKNOWN = "unknown"  # cannot tell now: retried later with backoff, dead after max_attempts


# ``verify(event, conn)``: a Verdict (True / False / None are read as done / not done / unknown)
Verify = Callable[[Event, Connection], "Verdict | bool | None"]


def verdict_of(value: object) -> Verdict:
    if isinstance(value, Verdict):
        return value
    if value is True:
        return Verdict.DONE
    if value is False:
        return Verdict.NOT_DONE
    if isinstance(value, str) and value in Verdict.__members__.values():
        return Verdict(value)
    return Verdict.UNKNOWN


class HandlerRegistry:
    def __init__(self) -> None:
        self._handlers: dict[tuple[str, str], Handler] = {}
        self._verifiers: dict[tuple[str, str], Verify] = {}

    def register(
        self, source: str, event_type: str, fn: Handler, verify: Verify | None = None
    ) -> Handler:
        key = (source, event_type)
        if key in self._handlers and self._handlers[key] is not fn:
            raise ConfigError(f"two handlers registered for source '{source}', type '{event_type}'")
        self._handlers[key] = fn
        if verify is not None:
            self._verifiers[key] = verify
        return fn

    def _key(self, source: str, event_type: str | None) -> tuple[str, str]:
        if event_type is not None and (source, event_type) in self._handlers:
            return (source, event_type)
        return (source, "*")

    def find(self, source: str, event_type: str | None) -> Handler | None:
        """The handler for (source, type), else the source's catch-all ``"*"``."""
        return self._handlers.get(self._key(source, event_type))

    def verifier(self, source: str, event_type: str | None) -> Verify | None:
        """The ``verify`` registered with the handler :meth:`find` returns."""
        return self._verifiers.get(self._key(source, event_type))

    def __len__(self) -> int:
        return len(self._handlers)

    def sources(self) -> set[str]:
        """The sources with at least one handler."""
        return {source for source, _ in self._handlers}


default_registry = HandlerRegistry()


def handler(
    source: str,
    event_type: str = "*",
    *,
    verify: Verify | None = None,
    registry: HandlerRegistry | None = None,
) -> Callable[[Handler], Handler]:
    """Decorator: register ``fn`` for ``source`` and ``event_type`` (``"*"`` = every type), with
    an optional ``verify(event, conn)`` asked before retrying an ambiguous attempt."""

    def decorate(fn: Handler) -> Handler:
        return (registry or default_registry).register(source, event_type, fn, verify)

    return decorate


def load_handler_modules(modules: Iterable[str], import_paths: Iterable[str] = ()) -> None:
    """Import the modules listed in ``[worker] handlers`` (they register on import), with the
    directories of ``[worker] import_paths`` first on the import path. A module that cannot be
    imported, or raises while it is, is one line naming it and the error (a ConfigError)."""
    for directory in reversed(tuple(import_paths)):  # the first listed is searched first
        if directory not in sys.path:
            sys.path.insert(0, directory)
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise ConfigError(_import_failure(name, exc)) from None


def _import_failure(name: str, exc: Exception) -> str:
    said = escape_control(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
    if isinstance(exc, ModuleNotFoundError) and exc.name and f"{name}.".startswith(f"{exc.name}."):
        # the handler module itself (or its package) is not on the import path, not a dependency
        return (
            f"[worker] handlers: cannot import module '{name}': {said} (put the directory that "
            "holds it in [worker] import_paths)"
        )
    if isinstance(exc, ImportError):
        return f"[worker] handlers: cannot import module '{name}': {said}"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return (
        f"[worker] handlers: module '{name}' raised {exc.__class__.__name__} when imported"
        f"{where}: {said}"
    )


def upsert_if_newer(
    conn: Connection,
    table: Table,
    values: Mapping[str, Any],
    *,
    key: Iterable[str],
    version: str,
) -> bool:
    """Insert the row, or update it only if ``values[version]`` is newer than the stored version.

    One statement (``INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE stored.version < new.version``),
    so out-of-order and repeated events converge to the newest state whatever order they arrive in.
    Returns True when a row was written. The statement is compiled on every call (dialect INSERTs
    are not in SQLAlchemy's statement cache, sqlalchemy/sqlalchemy#10445): a few hundred
    microseconds per call.
    """
    key_cols = list(key)
    stmt = insert_for(conn, table).values(dict(values))
    updates = {c: stmt.excluded[c] for c in values if c not in key_cols}
    stmt = stmt.on_conflict_do_update(
        index_elements=key_cols,
        set_=updates,
        where=table.c[version] < stmt.excluded[version],
    )
    return bool(conn.execute(stmt).rowcount)
