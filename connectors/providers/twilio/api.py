"""Twilio's Messages and Calls lists, read to reconcile its status callbacks (``kind = "twilio"``).

Twilio keeps no log of the callbacks it sent, but it lists every message and call with the status
it reached: ``GET /2010-04-01/Accounts/{AccountSid}/Messages.json`` (filter ``DateSent>``) and
``Calls.json`` (``StartTime>``), newest first, ``PageSize`` up to 1000, the next page's URI in the
body (``next_page_uri``, null on the last), with HTTP Basic auth (the account SID and auth token, or
an API key's SID and secret). Sources: docs/providers.md "Twilio".

A listed resource becomes the record of the status callback its current status must have produced:
identity ``{sid}:{status}``, as the receiver names a callback (``connectors.providers.twilio``). So a callback
that never arrived is ``missing``, and a business row with another status is ``diverged`` (a check on
``status``). Only statuses Twilio reports by callback are judged; a resource still on its way
(``queued``, ``ringing``, …) is left for a later run.

Cursor, per list: ``since`` (the newest date sent or started of the last complete scan) and, during
a scan, the next page's URI and the newest date seen so far. The filter takes a date: each scan
reads again from the day before ``since``, so a status reached a day after sending is read again.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

from connectors.base import Access, Capabilities, Cursor, Listing, Page, Record, ScanOptions
from connectors.errors import ConfigError, MalformedResponseError, NotFoundError, UnsupportedError
from connectors.http import ProviderClient, redact_url, require
from connectors.options import ProviderKeys, SourceOptions
from connectors.paging import body_linked_pages
from connectors.parsing import ParsedEvent
from connectors.provider import ClientFactory, identity_of

DEFAULT_BASE_URL = "https://api.twilio.com"
API = "/2010-04-01/Accounts"
PAGE_SIZE = 1000  # Twilio's maximum


@dataclass(frozen=True)
class TwilioList:
    path: str  # under the account: Messages, Calls
    items: str  # the key of a page's resources
    after: str  # the filter for "on or after this date"
    dated_by: str  # the resource's field that filter reads
    object_type: str  # as the receiver types a callback of it (message.delivered)
    # the statuses Twilio reports by status callback: a resource in another one is still on its way
    reported: frozenset[str]


LISTS = {
    "messages": TwilioList(
        "Messages",
        "messages",
        "DateSent>",
        "date_sent",
        "message",
        frozenset(
            {
                "sent",
                "delivered",
                "undelivered",
                "failed",
                "received",
                "read",
                "canceled",
                "partially_delivered",
            }
        ),
    ),
    # a call's status callback reports its end by default (StatusCallbackEvent: completed)
    "calls": TwilioList(
        "Calls",
        "calls",
        "StartTime>",
        "start_time",
        "call",
        frozenset({"completed", "busy", "failed", "no-answer", "canceled"}),
    ),
}
BY_OBJECT = {spec.object_type: spec for spec in LISTS.values()}


class TwilioKeys(ProviderKeys):
    # the account whose messages and calls are listed (AC…; a configuration value, not a secret)
    account_sid: str | None = None
    # an API key's SID (SK…) when api_key_env holds that key's secret, not the auth token
    api_key_sid: str | None = None
    # the lists reconciled ("messages", "calls")
    lists: tuple[str, ...] = ("messages", "calls")


def rule(values: Mapping[str, Any]) -> str | None:
    """The rule across a Twilio source's keys."""
    unknown = [name for name in values.get("lists") or () if name not in LISTS]
    if unknown:
        return f"key 'lists': {', '.join(map(repr, unknown))} is not one of {', '.join(LISTS)}"
    sid = values.get("account_sid")
    if sid is not None and not (isinstance(sid, str) and sid.startswith("AC") and len(sid) == 34):
        return "key 'account_sid' must be a Twilio account SID (AC followed by 32 characters)"
    if values.get("api_key_env") and not sid:
        return (
            "key 'account_sid' is needed with api_key_env: a reconciled Twilio source lists that "
            "account's messages and calls (without api_key_env it only receives)"
        )
    return None


def twilio_time(value: Any) -> datetime | None:
    """Twilio's RFC 2822 dates (``Wed, 18 Aug 2010 20:01:40 +0000``)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None


def resource_record(spec: TwilioList, item: Mapping[str, Any]) -> Record:
    """The status callback a listed resource's current status stands for."""
    sid, status = str(item["sid"]), str(item["status"])
    updated = twilio_time(item.get("date_updated")) or twilio_time(item.get(spec.dated_by))
    return Record(
        event_id=f"{sid}:{status}",
        event_type=f"{spec.object_type}.{status}",
        object_type=spec.object_type,
        object_id=sid,
        occurred_at=updated,
        object_version=updated.isoformat() if updated else None,
        payload=item,
    )


def as_callback(record: Record) -> tuple[ParsedEvent, bytes]:
    """A listed resource stored as the status callback it stands for (a backfill): the callback's
    own fields, so a handler written for callbacks reads it."""
    item = record.payload
    spec = BY_OBJECT.get(record.object_type or "", LISTS["messages"])
    prefix = "Message" if spec.object_type == "message" else "Call"
    fields = {
        "AccountSid": item.get("account_sid"),
        f"{prefix}Sid": item.get("sid"),
        f"{prefix}Status": item.get("status"),
        "To": item.get("to"),
        "From": item.get("from"),
        "ApiVersion": item.get("api_version") or "2010-04-01",
    }
    body = json.dumps({k: v for k, v in fields.items() if v is not None}).encode()
    return identity_of(record), body


class TwilioConnector:
    # lists current resources, not the callbacks it sent: an earlier status's callback is no orphan
    capabilities = Capabilities(lists_events=False)
    listing = Listing()

    def __init__(
        self,
        source: str,
        client: ProviderClient,
        *,
        account_sid: str,
        lists: tuple[str, ...] = ("messages", "calls"),
        page_size: int = PAGE_SIZE,
        auth_token: bool = True,
    ) -> None:
        self.source = source
        self.client = client
        self.account_sid = account_sid
        self.lists = tuple(LISTS[name] for name in lists)
        self.page_size = min(max(page_size, 1), PAGE_SIZE)
        self.auth_token = auth_token  # the account's auth token (not an API key) signs the calls

    @property
    def retention(self) -> timedelta | None:
        return None  # Twilio keeps messages and calls until they are deleted

    def request_rate(self) -> float | None:
        return self.client.budget.current_rate()

    def close(self) -> None:
        self.client.close()

    def _url(self, tail: str) -> str:
        return f"{API}/{self.account_sid}/{tail}"

    def pages(self, cursor: Cursor | None, options: ScanOptions) -> Iterator[Page]:
        state: dict[str, Any] = (
            {} if options.full else {k: dict(v) for k, v in (cursor or {}).items()}
        )
        default_since = options.now - options.initial_lookback
        for index, spec in enumerate(self.lists):
            last = index == len(self.lists) - 1
            yield from self._list_pages(spec, state, default_since, last)

    def _list_pages(
        self, spec: TwilioList, state: dict[str, Any], default_since: datetime, last: bool
    ) -> Iterator[Page]:
        pos = state.setdefault(spec.path, {})
        stored = datetime.fromisoformat(pos["since"]) if pos.get("since") else None
        since = stored or default_since
        newest = pos.get("newest") or (stored.isoformat() if stored else None)
        if pos.get("next"):
            first: tuple[str, Any] = (pos["next"], None)
        else:
            # the filter takes a date: from the day before, for statuses reached a day late
            day = (since - timedelta(days=1) if stored else since).date().isoformat()
            first = (self._url(f"{spec.path}.json"), {spec.after: day, "PageSize": self.page_size})
        pages = body_linked_pages(
            self.client,
            self.source,
            first,
            items=spec.items,
            next_key="next_page_uri",
            permission=f"read access to {spec.path} (an API key needs it)",
        )
        with closing(pages):
            for page in pages:
                records = []
                for i, item in enumerate(page.items):
                    where = f"{redact_url(page.url)} (item {i})"
                    require(item, "sid", source=self.source, url=where)
                    require(item, "status", source=self.source, url=where)
                    dated = twilio_time(item.get(spec.dated_by))
                    if dated and (newest is None or dated > datetime.fromisoformat(newest)):
                        newest = dated.isoformat()
                    if item["status"] in spec.reported:
                        records.append(resource_record(spec, item))
                state[spec.path] = (
                    {"since": pos.get("since"), "next": page.next, "newest": newest}
                    if page.next
                    else {"since": newest or since.isoformat()}
                )
                yield Page(
                    tuple(records),
                    {k: dict(v) for k, v in state.items()},
                    done=not page.next and last,
                    url=redact_url(page.url),
                )
                if not page.next:
                    return

    def _resource(self, spec: TwilioList, sid: str) -> Mapping[str, Any]:
        body, response = self.client.get_json(
            self._url(f"{spec.path}/{sid}.json"), permission=f"read access to {spec.path}"
        )
        url = str(response.request.url)
        require(body, "sid", source=self.source, url=url)
        require(body, "status", source=self.source, url=url)
        return dict(body)

    def fetch_object(self, object_type: str, object_id: str) -> Mapping[str, Any]:
        spec = BY_OBJECT.get(object_type)
        if spec is None:
            raise UnsupportedError(
                f"source '{self.source}': Twilio objects here are "
                f"{' and '.join(BY_OBJECT)}, not '{object_type}'"
            )
        return self._resource(spec, object_id)

    def fetch_event(self, event_id: str) -> Record:
        """The callback ``{sid}:{status}``, while the resource still has that status (Twilio keeps
        the current status only)."""
        sid, _, status = event_id.partition(":")
        spec = next((s for s in LISTS.values() if sid.startswith(_SID_PREFIX[s.object_type])), None)
        if spec is None or not status:
            raise NotFoundError(
                f"source '{self.source}': '{event_id}' is not a Twilio callback id (SM…:status, "
                "CA…:status)"
            )
        item = self._resource(spec, sid)
        if item["status"] != status:
            raise NotFoundError(
                f"source '{self.source}': {spec.object_type} {sid} is now '{item['status']}', "
                f"not '{status}': Twilio keeps only the current status"
            )
        return resource_record(spec, item)

    def redeliver(self, event_id: str) -> None:
        raise UnsupportedError(
            f"source '{self.source}': Twilio cannot be asked to send a status callback again"
        )

    def check_access(self) -> Access:
        body, response = self.client.get_json(
            f"{API}/{self.account_sid}.json", permission="read access to the account"
        )
        if not isinstance(body, dict) or not isinstance(body.get("sid"), str):
            raise MalformedResponseError(
                f"source '{self.source}': {redact_url(response.request.url)} named no account"
            )
        detail = f"the credentials read account {body['sid']}"
        if isinstance(body.get("status"), str):
            detail += f" ({body['status']})"
        warnings: tuple[str, ...] = ()
        if self.auth_token:
            warnings = (
                "the account's auth token can do everything the account can; reconciliation "
                "needs only to read messages and calls: a restricted API key (api_key_sid) "
                "would do",
            )
        return Access(detail, warnings)


_SID_PREFIX = {"message": ("SM", "MM"), "call": ("CA",)}


def build(options: SourceOptions, client: ClientFactory) -> TwilioConnector:
    keys = options.own(TwilioKeys)
    if not keys.account_sid:
        raise ConfigError(
            f"source '{options.name}': reconciling Twilio needs 'account_sid' (AC…), the account "
            "whose messages and calls are listed"
        )
    user = keys.api_key_sid or keys.account_sid
    token = base64.b64encode(f"{user}:{options.require_api_key()}".encode()).decode()
    return TwilioConnector(
        options.name,
        client(
            options.base_url or DEFAULT_BASE_URL,
            {"Authorization": f"Basic {token}"},
            options.hint(),
        ),
        account_sid=keys.account_sid,
        lists=keys.lists,
        page_size=options.page_size or PAGE_SIZE,
        auth_token=keys.api_key_sid is None,
    )
