"""Mollie's payments list, read to reconcile its webhooks (``kind = "mollie"``).

Mollie keeps no log of the webhook calls it made, but it lists every payment with the status it
reached, and each status it calls the webhook for is an event here (``tr_…:paid``, as the receiver
names a confirmed notification: ``connectors.providers.mollie``). Facts, each with its source:

- **Endpoint.** ``GET /v2/payments``, "all payments created with the current website profile",
  ``Authorization: Bearer`` a ``live_``/``test_`` API key (or a token with ``payments.read``).
  https://docs.mollie.com/reference/list-payments
- **Paging.** Cursor paging by object id: ``from`` (a payment id, ``^tr_.+$``; the page *starts with*
  that payment), ``limit`` 1 to 250 (default 50), ``sort`` ``desc`` (the default: newest to
  oldest) or ``asc``; ``profileId`` and ``testmode`` only for organisation tokens ("must not be
  sent" with an API key). The body: ``count``, ``_embedded.payments``, ``_links.next.href`` (null on
  the last page). https://docs.mollie.com/reference/list-payments,
  https://docs.mollie.com/overview/pagination; mollie-api-python 4.0.0
  ``mollie/api/objects/list.py`` (``PaginationList.get_next`` follows ``_links.next``), its test
  fixture ``tests/responses/customers_list_first.json`` (``next``: ``?from=<next page's first
  id>&limit=5``).
- **No time filter.** The list is read newest first by creation and stops at the first payment
  created before the window (``createdAt``).
- **Which statuses are events.** Mollie calls the webhook for ``paid``, ``authorized``,
  ``canceled``, ``expired`` and ``failed``, not for ``open`` or ``pending``
  (https://docs.mollie.com/docs/status-change). A payment created without a ``webhookUrl`` is called
  about by no one. So only those are records; a payment still ``open``, ``pending`` or ``authorized``
  is *watched* (its id kept in the cursor) and read back by id on later runs until it settles, for
  at most ``WATCH_DAYS``: its paid webhook, the one that matters, is then checked although the
  payment was created before that run's window.
- **Retention.** Mollie's docs state none for listing payments (none found on the list, pagination
  or payment pages): ``retention`` is None and no gap is reported.
- **Rate limit.** Mollie publishes no number: limits are "dynamic", "measured in requests per
  second" with a burst, and any endpoint may answer ``429 Too Many Requests``; no ``Retry-After`` is
  documented (https://docs.mollie.com/reference/rate-limiting,
  https://docs.mollie.com/changelog/document-429-too-many-requests-on-all-endpoints). hookledger
  keeps its default budget (``BUDGET``), which the receiver's confirmations share, and backs off.

Not found here: a refund or chargeback on a payment created before the window (Mollie calls the
webhook for it, the status staying ``paid``); the Refunds and Chargebacks lists could, later.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from connectors.base import Access, Capabilities, Cursor, Page, Record, ScanOptions
from connectors.budget import BudgetSettings
from connectors.errors import ConfigError, MalformedResponseError, NotFoundError
from connectors.event_list import Call
from connectors.http import redact_url
from connectors.options import SourceOptions
from connectors.paging import PageGuard, PageShape
from connectors.parsing import iso_time
from connectors.provider import ClientFactory
from connectors.providers.mollie.connector import (
    DEFAULT_BASE_URL,
    PAYMENT_ID,
    MollieConnector,
    payment_record,
)

LIST_PATH = "/v2/payments"
MAX_LIMIT = 250  # Mollie's maximum ``limit``
PERMISSION = "payments.read"
# Mollie publishes no number (dynamic limits): hookledger's default, shared with the confirmations
BUDGET = BudgetSettings(rate=10.0, concurrency=4)
# the statuses Mollie calls the webhook for (https://docs.mollie.com/docs/status-change)
REPORTED = frozenset({"paid", "authorized", "canceled", "expired", "failed"})
# statuses a payment can still leave: watched until it settles
UNSETTLED = frozenset({"open", "pending", "authorized"})
# a bank transfer's due date (its expiry) is at most "100 days after tomorrow" (mollie-api-node
# src/binders/payments/parameters.ts, after https://docs.mollie.com/reference/v2/payments-api/create-payment)
WATCH_DAYS = 101
MAX_WATCHED = 1000  # the cursor stays small: beyond, the oldest watched payments are let go
READ_BACK_PAGE = 50  # watched payments read back per page of a scan


def listed(body: Any, source: str, url: str) -> list[Any]:
    """A page's payments: ``_embedded.payments`` (an empty page may leave ``_embedded`` out)."""
    if not isinstance(body, Mapping):
        raise MalformedResponseError(f"source '{source}': {redact_url(url)} is not a JSON object")
    embedded = body.get("_embedded")
    if embedded is None and body.get("count") == 0:
        return []
    items = embedded.get("payments") if isinstance(embedded, Mapping) else None
    if not isinstance(items, list):
        raise MalformedResponseError(
            f"source '{source}': {redact_url(url)} has no list at '_embedded.payments'"
        )
    return items


def checked(item: Any, source: str, url: str, index: int) -> tuple[str, str, datetime]:
    """A listed payment's id, status and creation time, or one line naming what is wrong."""
    where = f"source '{source}': {redact_url(url)} item {index}"
    if not isinstance(item, Mapping):
        raise MalformedResponseError(f"{where} is not a payment")
    pid, status = item.get("id"), item.get("status")
    if not isinstance(pid, str) or not PAYMENT_ID.fullmatch(pid):
        raise MalformedResponseError(f"{where} has no payment id (tr_…)")
    if not isinstance(status, str) or not status:
        raise MalformedResponseError(f"{where} ({pid}) has no status")
    created = iso_time(item.get("createdAt"))
    if created is None:
        raise MalformedResponseError(f"{where} ({pid}) has no createdAt time")
    return pid, status, created


def notified(payment: Mapping[str, Any]) -> Record | None:
    """The event a payment's status stands for, or None where Mollie called no webhook for it."""
    if payment.get("status") not in REPORTED or not payment.get("webhookUrl"):
        return None
    return payment_record(payment)


def onward(body: Mapping[str, Any], source: str, url: str) -> Call | None:
    """The next page, from ``_links.next.href``: its query only, asked of the configured host (the
    API key goes nowhere else)."""
    links = body.get("_links")
    following = links.get("next") if isinstance(links, Mapping) else None
    href = following.get("href") if isinstance(following, Mapping) else None
    if following is None:
        return None
    if not isinstance(href, str) or not href:
        raise MalformedResponseError(
            f"source '{source}': {redact_url(url)} names a next page without an href"
        )
    params = tuple(parse_qsl(urlsplit(href).query))
    if not any(name == "from" for name, _ in params):
        raise MalformedResponseError(
            f"source '{source}': {redact_url(url)} names a next page without 'from'"
        )
    return Call(LIST_PATH, params)


class MolliePayments(MollieConnector):
    """Mollie's payments: listed newest first for a reconciliation, read by id for the receiver."""

    # lists payments' current statuses, not the calls Mollie made: no orphans
    capabilities = Capabilities(lists_events=False)

    def __init__(self, source: str, client: Any, *, page_size: int | None = None) -> None:
        super().__init__(source, client)
        self.page_size = min(max(page_size or MAX_LIMIT, 1), MAX_LIMIT)

    def fetch(self, call: Call) -> tuple[Any, str]:
        body, response = self.client.get_json(
            call.url, params=list(call.params) or None, permission=PERMISSION
        )
        return body, str(response.request.url)

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        pos: dict[str, Any] = {} if options.full else dict(cursor or {})
        stored = iso_time(pos.get("since"))
        since = (stored - options.overlap) if stored else options.now - options.initial_lookback
        # watched before this run (a full rescan still reads them back: they may be older)
        old = [str(w) for w in (cursor or {}).get("watch") or ()]
        if pos.get("unread"):  # a run that stopped while reading watched payments back
            yield from self._read_back(pos.get("since"), old, list(pos["unread"]), options.now)
            return
        newest = iso_time(pos.get("newest")) or stored
        fresh = [str(w) for w in pos.get("fresh") or ()]  # unsettled payments listed this run
        seen: set[str] = set()
        call = Call.from_json(pos["next"]) if pos.get("next") else self.first()
        for records, following, url, times in self._listing(call, since, fresh, seen):
            # a creation time ahead of now (a skewed or hostile answer) would stall the cursor
            times = [t for t in times if t <= options.now]
            newest = max([*times, *([newest] if newest else [])], default=None)
            kept = (newest or since).isoformat()
            if following is not None:
                position = {"since": pos.get("since"), "next": following.to_json()}
                position |= {"newest": kept, "watch": old, "fresh": fresh}
                yield Page(records, position, done=False, url=url)
                continue
            unread = [w for w in old if w not in seen and w not in fresh]
            if not unread:
                yield Page(records, {"since": kept, "watch": fresh[:MAX_WATCHED]}, True, url=url)
                return
            position = {"since": kept, "watch": fresh, "unread": unread}
            yield Page(records, position, done=False, url=url)
            yield from self._read_back(kept, fresh, unread, options.now)
            return

    def first(self) -> Call:
        return Call(LIST_PATH, (("limit", self.page_size),))

    def _listing(
        self, call: Call | None, since: datetime, fresh: list[str], seen: set[str]
    ) -> Iterator[tuple[tuple[Record, ...], Call | None, str, list[datetime]]]:
        """Each page's records, the next page (None once the window's start is passed) and its
        creation times; the unsettled payments are added to ``fresh``, every one to ``seen``."""
        read: dict[int, tuple[list[tuple[str, str, datetime]], list[Any], Call | None]] = {}

        def shape(request: Call, answer: tuple[Any, str]) -> PageShape:
            body, url = answer
            items = listed(body, self.source, url)
            facts = [checked(item, self.source, url, i) for i, item in enumerate(items)]
            following = onward(body, self.source, url)
            read[id(answer)] = (facts, items, following)
            ids = [pid for pid, _, _ in facts]
            return PageShape(ids, following is not None, following, redact_url(url))

        guard = PageGuard(self.source, shape, sleep=self.client.pause)
        while call is not None:
            answer = guard.fetch(self.fetch, call)
            facts, items, following = read.pop(id(answer))
            records, times = [], []
            for (pid, status, created), item in zip(facts, items, strict=True):
                if created < since:  # newest first: the window ends on this page
                    following = None
                    break
                seen.add(pid)
                times.append(created)
                if status in UNSETTLED and len(fresh) < MAX_WATCHED and pid not in fresh:
                    fresh.append(pid)
                if record := notified(item):
                    records.append(record)
            yield tuple(records), following, redact_url(answer[1]), times
            call = following

    def _read_back(
        self, since: Any, keep: list[str], unread: list[str], now: datetime
    ) -> Iterator[Page]:
        """The watched payments the list did not show again, read by id: a settled one's event is
        judged, one still unsettled is watched on (for ``WATCH_DAYS``), one Mollie lost let go."""
        keep = list(keep)
        horizon = now - timedelta(days=WATCH_DAYS)
        while unread:
            batch, unread = unread[:READ_BACK_PAGE], unread[READ_BACK_PAGE:]
            records = []
            for pid in batch:
                try:
                    payment = self.payment(pid)
                except NotFoundError:
                    continue
                created = iso_time(payment.get("createdAt"))
                if payment["status"] in UNSETTLED and created is not None and created > horizon:
                    keep.append(pid)
                if record := notified(payment):
                    records.append(record)
            position: dict[str, Any] = {"since": since, "watch": keep[:MAX_WATCHED]}
            if unread:
                position["unread"] = unread
            yield Page(tuple(records), position, done=not unread, url=f"{LIST_PATH}/{{id}}")

    def check_access(self) -> Access:
        """One payment of the list: the request a scan makes."""
        body, url = self.fetch(Call(LIST_PATH, (("limit", 1),)))
        for i, item in enumerate(listed(body, self.source, url)):
            checked(item, self.source, url, i)
        return Access(f"the API key lists payments ({redact_url(url)})")


def build(options: SourceOptions, client: ClientFactory) -> MolliePayments:
    if not options.api_key:
        raise ConfigError(f"source '{options.name}': Mollie needs api_key_env set")
    headers = {"Authorization": f"Bearer {options.api_key}"}
    return MolliePayments(
        options.name,
        client(options.base_url or DEFAULT_BASE_URL, headers, options.hint()),
        page_size=options.page_size,
    )
