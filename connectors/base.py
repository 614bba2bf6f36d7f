"""The interface every provider connector implements, and the values it returns.

A connector pages the provider's own record of what happened, starting from a cursor, and hands out
each page with the cursor that follows it. It never writes the cursor: the caller commits the page's
results and the new cursor in one transaction (a cursor moves with its data).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

Cursor = Mapping[str, Any]  # JSON-serialisable position, opaque to callers


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    """One delivery attempt as the provider recorded it (GitHub lists these)."""

    attempt_id: str
    delivered_at: datetime | None
    status: str | None  # GitHub: "OK" means delivered
    status_code: int | None
    redelivery: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "OK"


class Record(NamedTuple):
    """What the source says happened (an event) or how an object is now (a state record).

    ``event_id`` is the id the receiver stores for that provider (Stripe event id, GitHub delivery
    GUID); it is None for state records (Shopify resources), which are reconciled by object.

    A named tuple: immutable, and the cheapest such value to build; a scan builds one per source
    event.
    """

    event_id: str | None
    event_type: str | None
    object_type: str | None
    object_id: str | None
    occurred_at: datetime | None
    object_version: str | None
    payload: Mapping[str, Any]
    attempts: tuple[DeliveryAttempt, ...] = ()


BEYOND_RETENTION = "beyond_retention"


@dataclass(frozen=True)
class Gap:
    """A stretch of the source's history that can no longer be checked (beyond its retention)."""

    start: datetime | None
    end: datetime
    reason: str
    cause: str = BEYOND_RETENTION  # the cause of loss a run reports for it


def beyond_retention(
    start: datetime, now: datetime, retention: timedelta | None, provider: str
) -> Gap | None:
    """The part of a window from ``start`` to ``now`` that ``provider`` no longer keeps (None when
    it keeps all of it): a run reads from the horizon and reports this as its gap."""
    if retention is None or start >= now - retention:
        return None
    days = retention / timedelta(days=1)
    return Gap(
        start,
        now - retention,
        f"the window starts {start:%Y-%m-%d %H:%M} UTC, before the {days:g} days {provider} "
        "keeps: events before then cannot be checked",
    )


@dataclass(frozen=True)
class Page:
    records: tuple[Record, ...]
    cursor: Cursor  # where to resume after this page has been processed
    done: bool  # no more pages up to now
    gap: Gap | None = None
    url: str | None = None  # the request that produced it, secrets redacted
    slices: tuple[int, int] | None = None  # a sliced scan's (done, planned) slices, for progress
    # Records the provider listed again that the scan before judged already (the checkpoint itself
    # when a listing restarts at its time): not judged or counted again, but the scan saw them, so
    # the orphan window (the span from the oldest to the newest record listed) holds them.
    relisted: tuple[Record, ...] = ()


@dataclass(frozen=True)
class Capabilities:
    """What a provider's API can tell the reconciler: asked by the reconciler, which never compares
    a source's kind with a provider's name."""

    # Its list returns every event it sent (False: only the current objects, as Shopify's resources),
    # so an inbox event it does not list can be an orphan.
    lists_events: bool = True
    # Each listed record carries the provider's own delivery attempts (GitHub's hook deliveries):
    # a missing event's cause can be told from them.
    delivery_log: bool = False
    # fetch_event answers NotFoundError only for an id the provider never had (within retention):
    # the reconciler may then call an inbox event it cannot find an orphan.
    confirms_event_ids: bool = False
    # Where the object sits in a listed record's payload (Stripe events: data.object); empty: the
    # payload is the object.
    object_path: tuple[str, ...] = ()
    # A listed record carries its object's state (False: a thin event names it only, so a business
    # check judges the row by the object's current state, read from the API, or not at all).
    snapshots: bool = True

    def object_of(self, record: Record) -> Mapping[str, Any]:
        """The source object a record describes."""
        if not self.object_path:
            return record.payload
        value: Any = record.payload
        # decoded JSON is plain dicts: that check first, as the Mapping ABC's costs more (per record)
        for step in self.object_path:
            value = value.get(step) if isinstance(value, (dict, Mapping)) else None
        return value if isinstance(value, (dict, Mapping)) else record.payload


@dataclass(frozen=True)
class Listing:
    """Which of the provider's events a source's list returns: of these event types (every type when
    empty; ``*`` is a wildcard, as in Stripe's ``types[]``), and of this one account (None: every
    account; Stripe Connect's ``Stripe-Account``). An inbox event outside it is never an orphan."""

    event_types: tuple[str, ...] = ()
    account: str | None = None


@dataclass(frozen=True)
class ScanOptions:
    now: datetime
    initial_lookback: timedelta = field(default=timedelta(hours=72))
    full: bool = False  # ignore the cursor and rescan the initial look-back
    overlap: timedelta = field(default=timedelta(0))  # time-based cursors restart this much earlier
    # The ids of the objects the inbox holds events of for this source since the scan's look-back,
    # streamed: a provider with no list API reads each back (GoPay's payments).
    known_objects: Callable[[], Iterator[str]] | None = None


@dataclass(frozen=True)
class Access:
    """What one read-only request told of a source's credentials (``hookledger doctor``): what they
    read, and where the provider says so, what more they may do than reconciliation needs."""

    detail: str
    warnings: tuple[str, ...] = ()


class Connector(Protocol):
    source: str
    capabilities: Capabilities
    listing: Listing

    @property
    def retention(self) -> timedelta | None:
        """How long the provider keeps records that can be fetched or redelivered."""

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        """Pages from ``cursor`` (None: start from the initial look-back) up to now."""

    def fetch_event(self, event_id: str) -> Record:
        """One event (or delivery) by id."""

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        """The current state of one object."""

    def redeliver(self, event_id: str) -> None:
        """Ask the provider to send it again (raises UnsupportedError where it cannot)."""

    def request_rate(self) -> float | None:
        """Requests a second this connector sent lately (None: it does not count them)."""

    def check_access(self) -> Access:
        """One read-only request, the kind a scan makes: raises a ConnectorError (an AuthError
        naming the key) where the credentials cannot read what reconciliation reads."""

    def close(self) -> None: ...
