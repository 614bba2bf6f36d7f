"""Stripe: ``GET /v1/events`` (docs/providers.md §1).

Lists are newest first. Two phases, both resumable from the persisted cursor:

- **backfill** (no checkpoint yet, or ``--full``): ``created[gte] = now - initial_lookback_hours`` and
  ``starting_after=<last id>`` while ``has_more``. The newest id seen at the start becomes the
  checkpoint once the backfill is through; events that arrive meanwhile are caught up next time.
- **catch-up**: the same listing from the checkpoint's second less ``overlap_seconds``. Every
  listing is thus whole from its lower bound on: each second it reaches is read entire (many
  events share a ``created`` second on a busy account), so the scan's orphan window, from its
  oldest to its newest listed record, holds only time it read. The checkpoint itself is listed
  again as ``Page.relisted`` (seen, not judged twice). ``ending_before`` paging is kept only for a
  checkpoint stored without its time.

With more than one request allowed in flight (the source's ``max_concurrency``), both phases read
the window up to the scan's start as time slices paged at once (``created[gte]``/``created[lt]``,
``connectors.slices``); the cursor then holds every slice's position (``phase: sliced``) until all
are done, and becomes the same checkpoint.

Stripe lists events for 30 days. A checkpoint older than that cannot be caught up from: the stretch
between it and the retention horizon is reported as a :class:`Gap`, never skipped silently, and the
scan restarts as a backfill of the whole retained window.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from datetime import timedelta
from typing import Any

from connectors.base import (
    Access,
    Capabilities,
    Connector,
    Cursor,
    Gap,
    Listing,
    Page,
    Record,
    ScanOptions,
    beyond_retention,
)
from connectors.budget import BudgetSettings
from connectors.errors import MalformedResponseError, UnsupportedError
from connectors.http import ProviderClient, fetch_ahead, redact_url, require
from connectors.options import SourceOptions
from connectors.paging import PageGuard, PageShape
from connectors.parsing import ParsedEvent
from connectors.provider import ClientFactory, Provider, headers_named, timed_scheme
from connectors.providers.stripe.keys import StripeKeys
from connectors.providers.stripe.records import event_record, fetch_stripe_object, from_epoch
from connectors.providers.stripe.samples import STRIPE as SAMPLES
from connectors.providers.stripe.signature import parse_stripe, stripe_sign, verify_stripe
from connectors.providers.stripe.thin import StripeThinConnector, thin_current
from connectors.slices import Slice, SliceFetch, run_slices

DEFAULT_BASE_URL = "https://api.stripe.com"
RETENTION = timedelta(days=30)
PAGE_SIZE = 100
PERMISSION = "read access to Events (a restricted key needs 'Events: Read')"


_Fetched = tuple[list[Any], bool, str]  # a list page's items, has_more and URL


def _split_seen(data: list[Any], seen: Any) -> tuple[tuple[Record, ...], tuple[Record, ...]]:
    """A page's records, and apart the one the scan before judged already (its checkpoint)."""
    if seen is None or not any(item["id"] == seen for item in data):
        return tuple([event_record(item) for item in data]), ()
    records = tuple([event_record(item) for item in data if item["id"] != seen])
    return records, tuple([event_record(item) for item in data if item["id"] == seen])


def _newer_or_same(item: Mapping[str, Any], created: Any) -> bool:
    at = item.get("created")
    return not isinstance(created, int) or (isinstance(at, int) and at >= created)


class StripeConnector:
    # GET /v1/events/{id}: 404 for an id Stripe never had; an event carries its object in data.object
    capabilities = Capabilities(confirms_event_ids=True, object_path=("data", "object"))

    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        event_types: tuple[str, ...] = (),
        account: str | None = None,
        page_size: int = PAGE_SIZE,
        secret_key: bool = False,
    ) -> None:
        self.source = source
        self.client = client
        self.event_types = event_types
        self.listing = Listing(event_types, account)
        self.page_size = min(max(page_size, 1), 100)
        self.secret_key = secret_key  # a full-access sk_ key rather than a restricted rk_ one

    @property
    def retention(self) -> timedelta:
        return RETENTION

    def request_rate(self) -> float | None:
        return self.client.budget.current_rate()

    def close(self) -> None:
        self.client.close()

    def _params(self, **extra: Any) -> list[tuple[str, Any]]:
        params: list[tuple[str, Any]] = [("limit", self.page_size)]
        params += [("types[]", t) for t in self.event_types]
        params += [(k, v) for k, v in extra.items() if v is not None]
        return params

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        horizon = options.now - RETENTION
        gap = None
        position: dict[str, Any] = dict(cursor or {})
        if options.full:
            position = {}
        checkpoint_at = from_epoch(position.get("checkpoint_created"))
        if position.get("checkpoint") and checkpoint_at is not None and checkpoint_at < horizon:
            gap = Gap(
                checkpoint_at,
                horizon,
                f"checkpoint {position['checkpoint']} is older than Stripe's 30-day event retention",
            )
            position = {"phase": "backfill", "since": int(horizon.timestamp()) + 1}
        if position.get("phase") == "sliced":
            yield from self._sliced(position, gap)
            return
        sliced = self.client.budget.concurrency > 1
        if position.get("checkpoint") and position.get("phase") != "backfill":
            since = position.get("checkpoint_created")
            if not isinstance(since, int):
                yield from self._catch_up(position, gap)
                return
            start = since - int(options.overlap.total_seconds())
            if sliced:
                yield from self._sliced(self._window(start, options, position), gap)
                return
            position = {
                "phase": "backfill",
                "since": start,
                "top": position["checkpoint"],
                "top_created": since,
                "seen": position["checkpoint"],
            }
            yield from self._backfill(position, gap)
            return
        if "since" not in position:
            # a first look-back longer than Stripe keeps: what lies beyond is reported, not read
            gap = gap or beyond_retention(
                options.now - options.initial_lookback, options.now, RETENTION, "Stripe"
            )
            lookback = min(options.initial_lookback, RETENTION)
            position = {"phase": "backfill", "since": int((options.now - lookback).timestamp())}
        if sliced and not position.get("after"):  # (a sequential backfill under way goes on so)
            window = self._window(position["since"], options, {})
            yield from self._sliced(window, gap)
            return
        yield from self._backfill(position, gap)

    def _fetch(self, params: list[tuple[str, Any]]) -> _Fetched:
        """One list request: the raw items, ``has_more`` and the URL (validated, not yet records)."""
        body, response = self.client.get_json("/v1/events", params=params, permission=PERMISSION)
        url = str(response.request.url)
        data = require(body, "data", source=self.source, url=url, kind=list)
        has_more = require(body, "has_more", source=self.source, url=url, kind=bool)
        for i, item in enumerate(data):
            if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
                raise MalformedResponseError(
                    f"source '{self.source}': {redact_url(url)} item {i} has no event id"
                )
        return data, has_more, url

    def _guard(self, following: Callable[[_Fetched], Any]) -> Callable[[Any], _Fetched]:
        """``_fetch`` through a :class:`PageGuard`: an empty page with ``has_more``, a repeated
        page or a cursor that does not move is retried, then fails the scan."""

        def shape(request: Any, fetched: _Fetched) -> PageShape:
            data, has_more, url = fetched
            ids = [item["id"] for item in data]
            return PageShape(ids, has_more, following(fetched), redact_url(url))

        guard = PageGuard(self.source, shape, sleep=self.client.pause)
        return lambda request: guard.fetch(self._fetch, request)

    def _catch_up(self, position: dict[str, Any], gap: Gap | None) -> Iterator[Page]:
        anchor, anchor_created = position["checkpoint"], position.get("checkpoint_created")

        def newer(fetched: _Fetched) -> Any:
            data, has_more, _ = fetched
            return self._params(ending_before=data[0]["id"]) if has_more and data else None

        first = self._params(ending_before=anchor)
        with closing(fetch_ahead(self._guard(newer), first, newer)) as fetched:
            for data, has_more, url in fetched:
                if data:
                    anchor, anchor_created = data[0]["id"], data[0].get("created")
                records = [event_record(item) for item in data]
                cursor = {"checkpoint": anchor, "checkpoint_created": anchor_created}
                yield Page(tuple(records), cursor, done=not has_more, gap=gap, url=redact_url(url))
                gap = None
                if not has_more:
                    return

    def _backfill(self, position: dict[str, Any], gap: Gap | None) -> Iterator[Page]:
        since, seen = position["since"], position.get("seen")
        top, top_created = position.get("top"), position.get("top_created")
        fresh = not position.get("after")  # (a resumed backfill has its top already)

        def older(fetched: _Fetched) -> Any:
            data, has_more, _ = fetched
            if not has_more or not data:
                return None
            return self._params(**{"created[gte]": since, "starting_after": data[-1]["id"]})

        first = self._params(**{"created[gte]": since, "starting_after": position.get("after")})
        with closing(fetch_ahead(self._guard(older), first, older)) as fetched:
            for data, has_more, url in fetched:
                # the newest event when the listing began: the checkpoint (a catch-up's starts as
                # the one it moves on from, which the listing holds again or passes)
                if fresh and data and (top is None or _newer_or_same(data[0], top_created)):
                    top, top_created = data[0]["id"], data[0].get("created")
                fresh = False
                done = not has_more  # an empty page with has_more never gets here (the guard)
                if not done:
                    cursor = {
                        "phase": "backfill",
                        "since": since,
                        "after": data[-1]["id"],
                        "top": top,
                        "top_created": top_created,
                        "seen": seen,
                    }
                elif top is not None:
                    cursor = {"checkpoint": top, "checkpoint_created": top_created}
                else:  # nothing in the window yet: start again from the same point next time
                    cursor = {"phase": "backfill", "since": since}
                records, relisted = _split_seen(data, seen)
                yield Page(
                    records, cursor, done=done, gap=gap, url=redact_url(url), relisted=relisted
                )
                gap = None
                if done:
                    return

    @staticmethod
    def _window(since: int, options: ScanOptions, previous: Mapping[str, Any]) -> dict[str, Any]:
        """A sliced scan's first position: ``[since, now]`` as one slice, the checkpoint it moves on
        from (kept when the window turns out empty)."""
        until = int(options.now.timestamp()) + 1  # created[lt]: the scan's start second included
        return {
            "phase": "sliced",
            "since": since,
            "until": until,
            "slices": [Slice(since, until).as_json()],
            "top": previous.get("checkpoint"),
            "top_created": previous.get("checkpoint_created"),
            # the checkpoint itself was listed by the run before: its second is listed again
            # (another event of it may have come after), the event is not
            "seen": previous.get("checkpoint"),
        }

    def _sliced(self, position: Mapping[str, Any], gap: Gap | None) -> Iterator[Page]:
        try:
            plan = [Slice.from_json(value) for value in position["slices"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise MalformedResponseError(
                f"source '{self.source}': its stored cursor is not a sliced scan ({exc}); run "
                "'hookledger reconcile --full' to start the window again"
            ) from None
        top, top_created = position.get("top"), position.get("top_created")
        seen = position.get("seen")
        guards = threading.local()  # a fetcher pages one slice at a time: its guard is its own

        def older(fetched: _Fetched) -> Any:
            data, has_more, _ = fetched
            return self._params(starting_after=data[-1]["id"]) if has_more and data else None

        def fetch(piece: Slice) -> SliceFetch:
            if not hasattr(guards, "fetch"):
                guards.fetch = self._guard(older)
            # the newest slice has no upper bound: what is created while the scan runs (or by a
            # clock ahead of ours) is listed now, as a sequential scan lists it
            end = piece.end if piece.end < position["until"] else None
            params = self._params(
                **{
                    "created[gte]": piece.start,
                    "created[lt]": end,
                    "starting_after": piece.after,
                }
            )
            data, has_more, url = guards.fetch(params)
            oldest = data[-1].get("created") if data else None
            # records are built here, on the fetcher's thread: the writer only writes
            return SliceFetch(
                _split_seen(data, seen),
                data[-1]["id"] if data else piece.after,
                has_more,
                oldest if isinstance(oldest, int) else None,
                url,
            )

        pages = run_slices(
            plan, fetch, concurrency=self.client.budget.concurrency, name=f"{self.source}-slice"
        )
        with closing(pages):
            for page in pages:
                records, relisted = page.fetched.items
                if records:  # the newest record of the whole listing, whichever slice it is in
                    newest = records[0].payload.get("created")
                    if isinstance(newest, int) and (top_created is None or newest > top_created):
                        top, top_created = records[0].event_id, newest
                if not page.done:
                    cursor: dict[str, Any] = {
                        "phase": "sliced",
                        "since": position["since"],
                        "until": position["until"],
                        "slices": [s.as_json() for s in page.plan],
                        "top": top,
                        "top_created": top_created,
                        "seen": seen,
                    }
                elif top is not None:
                    cursor = {"checkpoint": top, "checkpoint_created": top_created}
                else:  # nothing in the window yet: start again from the same point next time
                    cursor = {"phase": "backfill", "since": position["since"]}
                url = redact_url(page.fetched.url)
                slices = (sum(s.done for s in page.plan), len(page.plan))
                yield Page(
                    records,
                    cursor,
                    done=page.done,
                    gap=gap,
                    url=url,
                    slices=slices,
                    relisted=relisted,
                )
                gap = None

    def fetch_event(self, event_id: str) -> Record:
        body, response = self.client.get_json(f"/v1/events/{event_id}", permission=PERMISSION)
        require(body, "id", source=self.source, url=str(response.request.url), kind=str)
        return event_record(body)

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        return fetch_stripe_object(self.client, self.source, object_type, object_id)

    def check_access(self) -> Access:
        data, _has_more, _url = self._fetch(self._params_with_limit(1))
        if data:
            mode = "live" if data[0].get("livemode") is True else "test"
            detail = f"lists events ({mode} mode)"
        else:
            detail = "lists events (none in Stripe's 30 days)"
        warnings: tuple[str, ...] = ()
        if self.secret_key:  # Stripe says what a key may do only by its kind
            warnings = (
                "a secret key (sk_…) can read and change everything in the account; a restricted "
                "key (rk_…) with 'Events: Read' and read access to the checked objects is all "
                "reconciliation needs",
            )
        return Access(detail, warnings)

    def _params_with_limit(self, limit: int) -> list[tuple[str, Any]]:
        return [("limit", limit), *(p for p in self._params() if p[0] != "limit")]

    def redeliver(self, event_id: str) -> None:
        raise UnsupportedError(
            f"source '{self.source}': Stripe has no API to redeliver an event; use "
            f"'stripe events resend {event_id} --webhook-endpoint=we_...' or backfill it instead"
        )


def _build(options: SourceOptions, client: ClientFactory) -> Connector:
    keys = options.own(StripeKeys)
    api_key = options.require_api_key()
    headers = {"Authorization": f"Bearer {api_key}"}
    if keys.account:  # a connected account: https://docs.stripe.com/connect/authentication
        headers["Stripe-Account"] = keys.account
    if keys.payload_style == "thin":
        return StripeThinConnector(
            options.name,
            client(options.base_url or DEFAULT_BASE_URL, headers, options.hint()),
            event_types=keys.event_types,
            account=keys.account,
            page_size=options.page_size or PAGE_SIZE,
        )
    return StripeConnector(
        options.name,
        client(options.base_url or DEFAULT_BASE_URL, headers, options.hint()),
        event_types=keys.event_types,
        account=keys.account,
        page_size=options.page_size or PAGE_SIZE,
        secret_key=api_key.startswith("sk_"),
    )


def _as_delivery(record: Record) -> tuple[ParsedEvent, bytes]:
    body = json.dumps(dict(record.payload)).encode()  # a listed event is the delivered body
    return parse_stripe({}, body), body


def _sign(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    return {
        "content-type": headers.get("content-type") or "application/json",
        "stripe-signature": stripe_sign(body, secret, int(now)),
    }


PROVIDER = Provider(
    "stripe",
    samples=SAMPLES,
    current=thin_current,
    verify=timed_scheme(verify_stripe, parse_stripe),
    build=_build,
    keys=StripeKeys,
    as_delivery=_as_delivery,
    # "Number of webhooks that have yet to be successfully delivered" (the Event object's
    # reference): it counts down as the endpoints of one event answer.
    fingerprint_ignore=("pending_webhooks",),
    sign=_sign,
    # Stripe allows 100 requests/s in live mode and 25 in test mode (docs/providers.md §1B); 20 a
    # second leaves the application room in either, 8 in flight reach it at 300 ms a page
    budget=BudgetSettings(rate=20.0, concurrency=8),
    sensitive_headers=headers_named("Stripe-Signature"),
)
