"""Mailgun's ``GET /v3/{domain}/events`` as the sandbox stands in for it (``/mailgun/v3/…``).

As Mailgun documents it (the sources are in ``connectors.providers.mailgun.api``): HTTP Basic
``api:<key>``, a wrong key answered 401 ``Forbidden`` as plain text; one domain a request (another
is 404); ``begin``/``end`` in epoch seconds (RFC 2822 dates too, as the SDK's examples send them),
``ascending`` ``yes``/``no``, required with a ``begin`` and no ``end``; ``limit`` 1..300 (outside
refused; Mailgun does not say what it does there, nor its default: 100 here); the filters ``event``
(``a OR b``), ``message-id`` and ``recipient``; the other documented filters refused as not stood
in for, any other parameter refused. A page is ``{"items": […], "paging": {"first", "last",
"next", "previous"}}``; ``next``/``previous`` are URLs with the page token in the path, valid only
as given (a token it never gave, or one with a query, is refused); the page after the last is
empty. Events of the last 3 days (the least Mailgun promises). 429 with ``Retry-After``.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute

from connectors.catalogue import compact_json
from connectors.providers.mailgun import _DOMAIN, event_data, signed_block
from connectors.sandbox.standin import Refused, Sent, StandIn

API_KEY = "6f5d3c2b1a0e9d8c7b6a5f4e3d2c1b0a-8e2f1a7b-4c9d3e5f"  # an account key's shape
DOMAIN = _DOMAIN
# the key the sandbox's webhooks were signed with (a test signs each delivery again with its own)
WEBHOOK_SIGNING_KEY = "sandbox-mailgun-webhook-signing-key"
RETENTION = timedelta(days=3)
FILTERS = ("event", "message-id", "recipient")
# documented filters the stand-in does not evaluate: refused rather than silently ignored
NOT_STOOD_IN = ("list", "attachment", "from", "subject", "to", "size", "recipients", "tags")
KNOWN = ("begin", "end", "ascending", "limit", "pretty", *FILTERS, *NOT_STOOD_IN, "severity")
# how a message's events follow one another (each a few seconds to minutes after the last)
FLOWS = (
    ("accepted", "delivered"),
    ("accepted", "delivered", "opened"),
    ("accepted", "delivered", "opened", "clicked"),
    ("accepted", "failed"),
)


@dataclass(frozen=True)
class Query:
    """One listing: its range, direction, filters and page size; ``after`` the (timestamp, id) of
    the last event a page gave (None: from the range's start)."""

    begin: float
    end: float | None
    ascending: bool
    limit: int
    filters: tuple[tuple[str, str], ...]
    after: tuple[float, str] | None = None


def event_id(rng: random.Random) -> str:
    """A Mailgun event id: 22 URL-safe base64 characters (``OMTXD3-sSmKIQa1gSKkYVA``)."""
    return base64.urlsafe_b64encode(rng.randbytes(16)).rstrip(b"=").decode()


def moment(raw: str, name: str) -> float:
    """A time parameter: epoch seconds or an RFC 2822 date."""
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(raw).timestamp()
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"'{name}' is not a valid date: {raw!r}") from exc


class MailgunStandIn(StandIn):
    kind = "mailgun"
    list_path = f"/v3/{DOMAIN}/events"
    source_keys = {"domain": DOMAIN}
    credentials = {"api_key_env": API_KEY}
    object_type = "message"
    status_path = "event"

    def __init__(self, box: Any) -> None:
        super().__init__(box)
        self.tokens: dict[str, Query] = {}  # the page tokens it gave, and where each reads on

    def routes(self) -> list[BaseRoute]:
        return [
            self.route("/v3/{domain}/events", self.events),
            self.route("/v3/{domain}/events/{token}", self.page),
        ]

    def error(self, status: int, message: str) -> Response:
        if status == 401:  # Mailgun answers a wrong key in plain text
            return PlainTextResponse("Forbidden", status_code=401)
        return JSONResponse({"message": message}, status_code=status)

    def throttled(self, wait: float) -> Response:
        response = self.error(429, "Too many requests")
        response.headers["Retry-After"] = str(max(1, round(wait + 0.5)))
        return response

    def authorised(self, request: Request) -> bool:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            return base64.b64decode(value, validate=True).decode() == f"api:{API_KEY}"
        except (binascii.Error, UnicodeDecodeError):
            return False

    def domain(self, request: Request) -> None:
        name = request.path_params["domain"]
        if name != DOMAIN:
            raise Refused(self.error(404, f"Domain not found: {name}"))

    async def events(self, request: Request) -> Response:
        self.domain(request)
        params = self.query(request, KNOWN)
        for name in (*NOT_STOOD_IN, "severity"):
            if name in params:
                raise Refused(self.error(400, f"the sandbox does not filter by '{name}'"))
        if params.get("pretty", "yes") not in ("yes", "no"):
            raise Refused(self.error(400, "'pretty' must be yes or no"))
        limit = self.size(params, "limit", 100, 300)
        try:
            begin = moment(params["begin"], "begin") if "begin" in params else None
            end = moment(params["end"], "end") if "end" in params else None
        except ValueError as exc:
            raise Refused(self.error(400, str(exc))) from exc
        asked = params.get("ascending")
        if asked not in (None, "yes", "no"):
            raise Refused(self.error(400, "'ascending' must be yes or no"))
        if begin is not None and end is None and asked is None:
            raise Refused(self.error(400, "'ascending' must be given when 'end' is not"))
        # a range with both ends says its direction itself
        ascending = end >= begin if begin is not None and end is not None else asked == "yes"
        if begin is None:  # from now back, or from the retention's start forward
            begin = (self.box.clock() - (RETENTION if ascending else timedelta(0))).timestamp()
        filters = tuple((k, params[k]) for k in FILTERS if k in params)
        return self.answer(request, Query(begin, end, ascending, limit, filters))

    async def page(self, request: Request) -> Response:
        self.domain(request)
        self.query(request, ())  # a page URL is followed as given
        query = self.tokens.get(request.path_params["token"])
        if query is None:
            raise Refused(self.error(400, "Invalid page token"))
        return self.answer(request, query)

    def answer(self, request: Request, query: Query) -> Response:
        listed = self.matching(query)
        if query.after is not None:
            listed = [e for e in listed if self.beyond(e, query.after, query.ascending)]
        items = listed[: query.limit]
        last = (items[-1]["timestamp"], items[-1]["id"]) if items else query.after
        first = (items[0]["timestamp"], items[0]["id"]) if items else query.after
        reverse = replace(query, ascending=not query.ascending)
        paging = {
            "first": self.link(request, replace(query, after=None)),
            "last": self.link(request, replace(reverse, after=None)),
            "next": self.link(request, replace(query, after=last)),
            "previous": self.link(request, replace(reverse, after=first)),
        }
        return JSONResponse({"items": items, "paging": paging})

    def matching(self, query: Query) -> list[dict[str, Any]]:
        """The query's events within the retention, in its order."""
        horizon = (self.box.clock() - RETENTION).timestamp()
        out = []
        for sent in self.sent:
            item, at = sent.item, sent.item["timestamp"]
            if at < horizon:
                continue
            if query.ascending and not (
                at >= query.begin and (query.end is None or at <= query.end)
            ):
                continue
            if not query.ascending and not (
                at <= query.begin and (query.end is None or at >= query.end)
            ):
                continue
            if all(self.kept(item, name, value) for name, value in query.filters):
                out.append(item)
        out.sort(key=lambda e: (e["timestamp"], e["id"]), reverse=not query.ascending)
        return out

    @staticmethod
    def kept(item: dict[str, Any], name: str, value: str) -> bool:
        if name == "event":  # a filter expression: ``delivered OR failed``
            return item["event"] in {v.strip() for v in value.split(" OR ")}
        if name == "message-id":
            return bool(item["message"]["headers"]["message-id"] == value.strip("<>"))
        return bool(item.get("recipient") == value)

    @staticmethod
    def beyond(item: dict[str, Any], after: tuple[float, str], ascending: bool) -> bool:
        key = (item["timestamp"], item["id"])
        return key > after if ascending else key < after

    def link(self, request: Request, query: Query) -> str:
        """A page's URL: the token (the query and its position, as Mailgun's encode them) in the
        path after the list's own; the same page has the same URL."""
        state = [query.ascending, query.begin, query.end, query.limit, query.filters, query.after]
        token = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
        self.tokens[token] = query
        path = request.url.path
        base = path.rsplit("/", 1)[0] if "token" in request.path_params else path.rstrip("/")
        return str(request.url.replace(path=f"{base}/{token}", query=""))

    @staticmethod
    def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
        out: list[Sent] = []
        room = max(span - timedelta(minutes=15), timedelta(seconds=1))
        while len(out) < count:
            at = start + room * rng.random()
            stamp = at.astimezone(UTC).strftime("%Y%m%d%H%M%S")
            message_id = f"{stamp}.{rng.getrandbits(64):016x}@{DOMAIN}"
            recipient = f"user{rng.randrange(1000)}@example.com"
            for event_type in rng.choice(FLOWS):
                at += timedelta(seconds=rng.uniform(1, 180))
                item = event_data(event_type, event_id(rng), at.timestamp(), message_id, recipient)
                token = "".join(rng.choice("0123456789abcdef") for _ in range(50))
                block = signed_block(WEBHOOK_SIGNING_KEY, at.timestamp(), token)
                body = compact_json({"signature": block, "event-data": item})
                out.append(
                    Sent(
                        item["id"],
                        datetime.fromtimestamp(item["timestamp"], UTC),
                        item,
                        body,
                        {"content-type": "application/json"},
                        object_type="message",
                        object_id=message_id,
                        status=event_type,
                    )
                )
        out.sort(key=lambda s: s.at)
        return out[:count]


STAND_IN = MailgunStandIn
