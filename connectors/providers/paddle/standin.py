"""Paddle's ``GET /events`` as the sandbox stands in for it (``/paddle/events``).

As Paddle documents it (docs/providers.md "Paddle"): a Bearer API key; ``after``, ``per_page``
(default 50, at most 200: more is answered with 200, as Paddle does), ``order_by`` (``id[ASC]`` or
``id[DESC]``, the default) and ``event_type`` (comma-separated); any other parameter refused; events
of the last 90 days; ``meta.pagination`` with ``next`` (the same query, ``after`` the page's last
id), ``has_more`` and ``estimated_total``; errors and the 429 in Paddle's shape.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from connectors.providers.paddle import _data
from connectors.sandbox.standin import Refused, Sent, StandIn

API_KEY = "pdl_sdbx_apikey_01hsandboxstandin"
RETENTION = timedelta(days=90)
TYPES = ("transaction.completed", "transaction.paid", "customer.updated", "subscription.updated")
CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def paddle_id(prefix: str, at: datetime, rng: random.Random) -> str:
    """A Paddle id: ``prefix_`` and 26 lower-case characters whose first ten are the time in
    milliseconds (so ids sort by time, as ``order_by=id`` relies on)."""
    ms = int(at.timestamp() * 1000)
    head = "".join(CROCKFORD[(ms >> (5 * (9 - i))) & 31] for i in range(10))
    return f"{prefix}_{head}{''.join(rng.choice(CROCKFORD) for _ in range(16))}"


def iso(at: datetime) -> str:
    return at.isoformat(timespec="microseconds").replace("+00:00", "Z")


class PaddleStandIn(StandIn):
    kind = "paddle"
    list_path = "/events"
    credentials = {"api_key_env": API_KEY}
    object_type = "transaction"
    status_path = "data.status"

    def routes(self) -> list[BaseRoute]:
        return [self.route("/events", self.events)]

    def error(self, status: int, message: str) -> Response:
        code = {401: "authentication_missing", 403: "forbidden", 429: "too_many_requests"}
        return JSONResponse(
            {
                "error": {
                    "type": "api_error" if status == 429 else "request_error",
                    "code": code.get(status, "bad_request"),
                    "detail": message,
                    "documentation_url": "https://developer.paddle.com/v1/errors/shared/"
                    + code.get(status, "bad_request"),
                },
                "meta": {"request_id": str(uuid.uuid4())},
            },
            status_code=status,
        )

    def throttled(self, wait: float) -> Response:
        response = self.error(
            429,
            "IP address exceeded the allowed rate limit. Retry after the number of seconds in "
            "the Retry-After header.",
        )
        response.headers["Retry-After"] = str(max(1, round(wait + 0.5)))
        return response

    def authorised(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {API_KEY}"

    async def events(self, request: Request) -> Response:
        params = self.query(request, ("after", "per_page", "order_by", "event_type"))
        raw = params.get("per_page", "50")
        if not raw.isdigit() or int(raw) < 1:
            raise Refused(self.error(400, "per_page must be a positive integer"))
        size = min(int(raw), 200)  # Paddle answers more than its maximum with its maximum
        # paddle-python-sdk sends the direction in lower case (``id[desc]``)
        order = params.get("order_by", "id[DESC]").upper().replace("ID[", "id[")
        if order not in ("id[ASC]", "id[DESC]"):
            raise Refused(self.error(400, "order_by must be id[ASC] or id[DESC]"))
        horizon = iso(self.box.clock() - RETENTION)
        events = [s.item for s in self.sent if s.item["occurred_at"] >= horizon]
        if params.get("event_type"):
            wanted = set(params["event_type"].split(","))
            events = [e for e in events if e["event_type"] in wanted]
        events.sort(key=lambda e: e["event_id"], reverse=order == "id[DESC]")
        if after := params.get("after"):
            ids = [e["event_id"] for e in events]
            if after not in ids:
                raise Refused(self.error(400, f"after: no entity with id {after}"))
            events = events[ids.index(after) + 1 :]
        page, more = events[:size], len(events) > size
        following = (
            str(request.url.include_query_params(after=page[-1]["event_id"], per_page=size))
            if more
            else None
        )
        return JSONResponse(
            {
                "data": page,
                "meta": {
                    "request_id": str(uuid.uuid4()),
                    "pagination": {
                        "per_page": size,
                        "next": following,
                        "has_more": more,
                        "estimated_total": len(events),
                    },
                },
            }
        )

    @staticmethod
    def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
        out = []
        for n in range(count):
            at = start + span * (n + rng.random()) / max(count, 1)
            event_type = rng.choice(TYPES)
            data = _data(event_type, iso(at))
            data["id"] = paddle_id(data["id"].partition("_")[0], at, rng)
            if event_type == "transaction.paid":
                data["status"] = "paid"
            event_id = paddle_id("evt", at, rng)
            item: dict[str, Any] = {
                "event_id": event_id,
                "event_type": event_type,
                "occurred_at": iso(at),
                "data": data,
            }
            body = {**item, "notification_id": paddle_id("ntf", at, rng)}
            out.append(
                Sent(
                    event_id,
                    at,
                    item,
                    json.dumps(body, separators=(",", ":")).encode(),
                    {"content-type": "application/json"},
                    object_type=event_type.partition(".")[0],
                    object_id=data["id"],
                    status=data.get("status"),
                )
            )
        return out


STAND_IN = PaddleStandIn
