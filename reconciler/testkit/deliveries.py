"""Delivering events to handlers in a test the ways production delivers them: once in order, each
twice, newest first, twice and shuffled, or once and then replayed.

Each delivery is applied as the worker applies an attempt, retries included, and as a replay
applies it: no inbox deduplicates it and no applied mark stops it (``reconciler.ops.replaying``).
That is deliberate: the inbox stores an event once, but an operator's replay, a lease taken over
from a hung worker, or the drill run a handler again, and a handler is right only when running it
again changes nothing. A transient failure is retried at once, without backoff.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Engine

from reconciler.errors import HookledgerError
from reconciler.inbox.handlers import Event, HandlerRegistry, default_registry
from reconciler.ops.replaying import Applied, ReplayApplier, Status
from reconciler.outbox.writer import DEFAULT_MAX_PAYLOAD

# the ways ``deliver`` takes, each what production can do to a handler
WAYS = ("once", "twice", "reversed", "shuffled", "replayed")
DEFAULT_MAX_ATTEMPTS = 3


class HandlerFailed(HookledgerError):
    """An event ended dead in a test: its handler failed permanently, or on every attempt."""

    def __init__(self, applied: Applied) -> None:
        event = applied.event
        super().__init__(
            f"{event.source} event {event.event_id} ({event.event_type}) ended dead after "
            f"{applied.attempts} attempt(s): {applied.error!r}"
        )
        self.applied = applied


def order_of(events: Sequence[Event], way: str, seed: int = 0) -> list[Event]:
    """The deliveries of ``events`` (in the order the provider made them) the ``way`` says: a
    replay's copy has ``replay`` one higher, as an operator's replay hands it."""
    if way == "once":
        return list(events)
    if way == "twice":  # a redelivery right behind each
        return [e for e in events for _ in range(2)]
    if way == "reversed":  # newest first: the worst order for a handler that keeps the last write
        return list(reversed(events))
    if way == "shuffled":  # each twice, in any order
        order = [e for e in events for _ in range(2)]
        random.Random(seed).shuffle(order)
        return order
    if way == "replayed":  # all of them, then all again as an operator's replay
        return list(events) + [replace(e, replay=e.replay + 1) for e in events]
    raise ValueError(f"way {way!r}: one of {', '.join(WAYS)}")


class Deliveries:
    """Applies events to the handlers of ``handlers`` (default: those registered with
    ``@handler``), writing ``business`` through ``event.business``. ``conn`` is a transaction on
    ``inbox`` when given (a database apart, as with ``[business] url``), else on ``business``.
    ``outbox_targets``: the names ``event.outbox.add`` may use (default: any)."""

    def __init__(
        self,
        business: Engine,
        handlers: HandlerRegistry | None = None,
        *,
        inbox: Engine | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        outbox_targets: Iterable[str] | None = None,
    ) -> None:
        targets = frozenset(outbox_targets) if outbox_targets is not None else None
        self._applier = ReplayApplier(
            handlers if handlers is not None else default_registry,
            business,
            inbox if inbox is not None else business,
            max_attempts=max_attempts,
            targets=targets,
            max_payload_bytes=DEFAULT_MAX_PAYLOAD,
        )
        self.applied: list[Applied] = []

    def deliver(
        self, *events: Event, way: str = "once", seed: int = 0, raise_dead: bool = True
    ) -> list[Applied]:
        """Apply ``events`` the ``way`` says (:data:`WAYS`); what became of each delivery. An
        event that ends dead raises :class:`HandlerFailed` (with its handler's error as the cause)
        unless ``raise_dead`` is False."""
        done = []
        for event in order_of(events, way, seed):
            applied = self._applier.apply(event)
            self.applied.append(applied)
            done.append(applied)
            if raise_dead and applied.status is Status.DEAD:
                raise HandlerFailed(applied) from applied.error
        return done

    @property
    def messages(self) -> dict[tuple[str, str], Any]:
        """The outgoing messages committed by ``event.outbox.add``, by (target, key): one per
        key, as the outbox keeps them, each payload as its JSON document."""
        return {key: json.loads(body) for key, body in self._applier.outbox.messages.items()}


class Deliver:
    """``deliver(*events)``: the events delivered the one way this test runs in (``way``), with
    the ``seed`` its shuffle uses; the pytest fixture ``hookledger_deliver`` hands one per way."""

    def __init__(self, deliveries: Deliveries, way: str, seed: int = 0) -> None:
        if way not in WAYS:
            raise ValueError(f"way {way!r}: one of {', '.join(WAYS)}")
        self.deliveries = deliveries
        self.way = way
        self.seed = seed

    def __call__(self, *events: Event, raise_dead: bool = True) -> list[Applied]:
        return self.deliveries.deliver(*events, way=self.way, seed=self.seed, raise_dead=raise_dead)

    @property
    def messages(self) -> dict[tuple[str, str], Any]:
        return self.deliveries.messages

    def __repr__(self) -> str:
        return f"Deliver(way={self.way!r}, seed={self.seed})"
