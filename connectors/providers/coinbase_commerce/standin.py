"""Coinbase Commerce's ``GET /events`` as the sandbox stands in for it (``/coinbase_commerce/events``).

As Coinbase documents it (the sources are in ``connectors.providers.coinbase_commerce.api``): the
key in ``X-CC-Api-Key`` (401 ``authentication_error`` otherwise), ``X-CC-Version`` optional and
``2018-03-22`` when given; ``order`` ``desc`` (default) or ``asc``, ``limit`` 0..100 (default 25;
beyond refused: Coinbase does not say what it does there), ``starting_after`` or ``ending_before``
(not both) an event id it listed (another refused); any other parameter refused. A page is
``{"pagination": {order, starting_after, ending_before, total, yielded, limit, cursor_range,
previous_uri, next_uri}, "data": […]}``, ``next_uri`` the same query with ``starting_after`` the
page's last id, null on the last page. ``GET /events/{id}`` answers ``{"data": event}`` or 404.
Errors ``{"error": {"type", "message"}}``; 429 ``rate_limit_exceeded`` without ``Retry-After``
(none is documented). No retention horizon (none is documented).
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from connectors.providers.coinbase_commerce import _charge, _iso
from connectors.sandbox.standin import Refused, Sent, StandIn

API_KEY = "0b6a9e2c-5d4f-4e1a-9c3b-7f8e6d5c4b3a"  # a Commerce API key's shape (a UUID)
VERSION = "2018-03-22"
ERROR_TYPES = {
    400: "invalid_request",
    401: "authentication_error",
    404: "not_found",
    429: "rate_limit_exceeded",
}
# how a charge's events follow one another (each a few seconds to minutes after the last)
FLOWS = (
    ("charge:created", "charge:pending", "charge:confirmed"),
    ("charge:created", "charge:confirmed"),
    ("charge:created", "charge:failed"),
    ("charge:created",),
)
STATUS = {
    "charge:created": "NEW",
    "charge:pending": "PENDING",
    "charge:confirmed": "COMPLETED",
    "charge:failed": "EXPIRED",
}


class CoinbaseCommerceStandIn(StandIn):
    kind = "coinbase_commerce"
    list_path = "/events"
    credentials = {"api_key_env": API_KEY}
    object_type = "charge"
    status_path = "type"  # a charge's state: the type of its latest event

    def routes(self) -> list[BaseRoute]:
        return [self.route("/events", self.events), self.route("/events/{event_id}", self.event)]

    def error(self, status: int, message: str) -> Response:
        kind = ERROR_TYPES.get(status, "invalid_request")
        return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)

    def throttled(self, wait: float) -> Response:
        return self.error(429, "Rate limit exceeded")

    def authorised(self, request: Request) -> bool:
        if request.headers.get("x-cc-version", VERSION) != VERSION:
            raise Refused(self.error(400, "Invalid API version"))
        return request.headers.get("x-cc-api-key") == API_KEY

    def listed(self, ascending: bool) -> list[dict[str, Any]]:
        events = [s.item for s in self.sent]
        events.sort(key=lambda e: (e["created_at"], e["id"]), reverse=not ascending)
        return events

    async def events(self, request: Request) -> Response:
        params = self.query(request, ("order", "limit", "starting_after", "ending_before"))
        order = params.get("order", "desc")
        if order not in ("asc", "desc"):
            raise Refused(self.error(400, "order must be asc or desc"))
        raw = params.get("limit", "25")
        if not raw.isdigit() or int(raw) > 100:
            raise Refused(self.error(400, "limit must be between 0 and 100"))
        limit = int(raw)
        after, before = params.get("starting_after"), params.get("ending_before")
        if after and before:
            raise Refused(self.error(400, "give starting_after or ending_before, not both"))
        events = self.listed(order == "asc")
        ids = [e["id"] for e in events]
        for cursor in (after, before):
            if cursor is not None and cursor not in ids:
                raise Refused(self.error(400, f"{cursor} is not an event of this account"))
        if after is not None:
            start = ids.index(after) + 1
            page, more = events[start : start + limit], len(events) > start + limit
        elif before is not None:
            end = ids.index(before)
            page, more = events[max(0, end - limit) : end], end < len(events)
        else:
            page, more = events[:limit], len(events) > limit
        page_ids = [e["id"] for e in page]

        def uri(**cursor: str) -> str:
            query = {"order": order, "limit": str(limit), **cursor}
            return str(request.url.replace_query_params(**query))

        following = uri(starting_after=page_ids[-1]) if more and page_ids else None
        first_shown = bool(page_ids) and page_ids[0] != ids[0]
        pagination = {
            "order": order,
            "starting_after": after,
            "ending_before": before,
            "total": len(events),
            "yielded": len(page),
            "limit": limit,
            "previous_uri": uri(ending_before=page_ids[0]) if first_shown else None,
            "next_uri": following,
            "cursor_range": [page_ids[0], page_ids[-1]] if page_ids else [],
        }
        return JSONResponse({"pagination": pagination, "data": page, "warnings": []})

    async def event(self, request: Request) -> Response:
        self.query(request, ())
        wanted = request.path_params["event_id"]
        for sent in self.sent:
            if sent.event_id == wanted:
                return JSONResponse({"data": sent.item, "warnings": []})
        raise Refused(self.error(404, "Not found"))

    @staticmethod
    def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
        out: list[Sent] = []
        room = max(span - timedelta(minutes=15), timedelta(seconds=1))
        while len(out) < count:
            at = (start + room * rng.random()).replace(microsecond=0)
            charge = _charge("charge:created", at)
            charge |= {
                "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "code": "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(8)),
                "hosted_url": f"https://commerce.coinbase.com/pay/{uuid.UUID(int=rng.getrandbits(128))}",
                "created_at": _iso(at),
                "expires_at": _iso(at + timedelta(hours=1)),
                "timeline": [],
            }
            for event_type in rng.choice(FLOWS):
                at += timedelta(seconds=rng.randint(1, 180))
                timeline = [*charge["timeline"], {"time": _iso(at), "status": STATUS[event_type]}]
                charge = {**charge, "timeline": timeline}
                item: dict[str, Any] = {
                    "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    "resource": "event",
                    "type": event_type,
                    "api_version": VERSION,
                    "created_at": _iso(at),
                    "data": charge,
                }
                body = {
                    "attempt_number": 1,
                    "event": item,
                    "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                    "scheduled_for": _iso(at),
                }
                out.append(
                    Sent(
                        item["id"],
                        at.astimezone(UTC),
                        item,
                        json.dumps(body, separators=(",", ":")).encode(),
                        {"content-type": "application/json"},
                        object_type="charge",
                        object_id=charge["id"],
                        status=event_type,
                    )
                )
        out.sort(key=lambda s: (s.at, s.event_id))
        return out[:count]


STAND_IN = CoinbaseCommerceStandIn
