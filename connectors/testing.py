"""Fakes for tests, shipped with the package so that anyone's tests can use them: an in-memory
source, a wrapper that makes a real source fail after some pages (a run that dies mid-scan), and a
clock that moves only when told (the worker and the reconciler take ``clock=``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from connectors.base import (
    Access,
    Capabilities,
    Connector,
    Cursor,
    Listing,
    Page,
    Record,
    ScanOptions,
)
from connectors.errors import NotFoundError, UnavailableError


class MemoryConnector:
    """A source whose history is a list of records, paged ``page_size`` at a time by offset."""

    def __init__(
        self,
        source: str,
        records: Sequence[Record],
        *,
        page_size: int = 100,
        objects: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
        capabilities: Capabilities | None = None,
        retention: timedelta | None = None,
    ) -> None:
        self.source = source
        self.records = list(records)
        self.page_size = page_size
        self.objects: dict[tuple[str, str], Mapping[str, Any]] = dict(objects or {})
        self.capabilities = capabilities or Capabilities(confirms_event_ids=True)
        self.listing = Listing()
        self._retention = retention
        self.fetched: list[tuple[str, str]] = []  # fetch_object calls, in order

    @property
    def retention(self) -> timedelta | None:
        return self._retention

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        offset = 0 if cursor is None or options.full else int(cursor["offset"])
        while True:
            chunk = tuple(self.records[offset : offset + self.page_size])
            offset += len(chunk)
            done = offset >= len(self.records)
            yield Page(chunk, {"offset": offset}, done)
            if done:
                return

    def fetch_event(self, event_id: str) -> Record:
        for r in self.records:
            if r.event_id == event_id:
                return r
        raise NotFoundError(f"source '{self.source}': no event {event_id}")

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        self.fetched.append((object_type, object_id))
        try:
            return self.objects[(object_type, object_id)]
        except KeyError:
            raise NotFoundError(f"source '{self.source}': no {object_type} {object_id}") from None

    def redeliver(self, event_id: str) -> None:
        self.fetch_event(event_id)

    def request_rate(self) -> float | None:
        return None

    def check_access(self) -> Access:
        return Access(f"{len(self.records)} records in memory")

    def close(self) -> None:
        return None


class StopsAfter:
    """A connector that fails as an unreachable provider would after ``pages`` pages."""

    def __init__(self, inner: Connector, pages: int) -> None:
        self.inner, self.limit = inner, pages

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        for n, page in enumerate(self.inner.pages(cursor, options), start=1):
            yield page
            if n >= self.limit:
                raise UnavailableError(f"source '{self.inner.source}': stopped after {n} page(s)")


class FakeClock:
    """Now, until :meth:`advance` moves it (aware UTC, as every time hookledger stores)."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
