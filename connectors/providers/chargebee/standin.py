"""Chargebee's ``GET /api/v2/events`` as the sandbox stands in for it (``/chargebee/api/v2/events``).

As Chargebee documents it (facts and sources: ``connectors/providers/chargebee/api.py``): HTTP Basic
with the API key as the user name; ``limit`` 1..100 (default 10) and ``offset`` = a ``next_offset``
it gave (any other refused); the documented filters with their operators (``id``, ``event_type``,
``source``, ``webhook_status`` (the last 6 days only), ``occurred_at[after|before|on|between]``) and
the deprecated ``start_time``/``end_time``; ``sort_by[asc|desc]=occurred_at`` (ascending when not
given: the list operations' documented default); any other parameter refused; events of the last
90 days; ``{"list": [{"event": …}], "next_offset": …}``; errors in Chargebee's shape (``message``,
``type``, ``api_error_code``, ``param``), the 429 ``api_request_limit_exceeded`` with
``Retry-After`` (which chargebee 3.29.0 reads: ``http_request.parse_retry_after``; Chargebee's pages
do not say they send it).
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import string
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from connectors.sandbox.standin import Refused, Sent, StandIn

API_KEY = "test_hookledgerStandInKey0123456789"  # Chargebee's test-site keys start test_
RETENTION = timedelta(days=90)
WEBHOOK_STATUS_DAYS = timedelta(
    days=6
)  # webhook_status[…] "returns the events (occurred in the past 6 days)"
SEQUENCE = 113000000000  # an offset's second part: Chargebee's internal, increasing id
BASE62 = string.ascii_letters + string.digits
OPERATORS = {
    "id": ("is", "is_not", "starts_with", "in", "not_in"),
    "event_type": ("is", "is_not", "in", "not_in"),
    "source": ("is", "is_not", "in", "not_in"),
    "webhook_status": ("is", "is_not", "in", "not_in"),
    "occurred_at": ("after", "before", "on", "between"),
}
KNOWN = (
    "limit",
    "offset",
    "start_time",
    "end_time",
    "sort_by[asc]",
    "sort_by[desc]",
    *(f"{name}[{op}]" for name, ops in OPERATORS.items() for op in ops),
)


def cb_id(rng: random.Random, prefix: str = "") -> str:
    """A Chargebee id: 16 letters and digits (events ``ev_…``)."""
    return prefix + "".join(rng.choice(BASE62) for _ in range(16))


def values(raw: str) -> list[str]:
    """An ``in``/``between`` value: ``[a,b]`` (quotes, as the libraries send them, allowed)."""
    inner = raw.strip()
    if not (inner.startswith("[") and inner.endswith("]")):
        raise ValueError(raw)
    return [v.strip().strip("'\"") for v in inner[1:-1].split(",") if v.strip()]


class ChargebeeStandIn(StandIn):
    kind = "chargebee"
    list_path = "/api/v2/events"
    credentials = {"api_key_env": API_KEY}
    object_type = "subscription"
    status_path = "content.subscription.status"

    def routes(self) -> list[BaseRoute]:
        return [
            self.route("/api/v2/events", self.events),
            self.route("/api/v2/events/{id}", self.event),
        ]

    def refusal(
        self, status: int, kind: str, code: str, message: str, param: str | None
    ) -> Response:
        body: dict[str, Any] = {"message": message, "type": kind, "api_error_code": code}
        if param:
            body["param"] = param
        # the older attributes Chargebee still returns beside them
        body |= {"error_code": code, "error_msg": message, "http_status_code": status}
        return JSONResponse(body, status_code=status)

    def error(self, status: int, message: str) -> Response:
        if status == 401:
            return self.refusal(
                401, "untyped", "api_authentication_failed", "Sorry, authentication failed.", None
            )
        if status == 429:
            return self.refusal(
                429, "operation_failed", "api_request_limit_exceeded", message, None
            )
        if status == 404:
            return self.refusal(404, "invalid_request", "resource_not_found", message, None)
        param = message.partition(":")[0] if ":" in message else None
        return self.refusal(status, "invalid_request", "invalid_request", message, param)

    def wrong(self, param: str, message: str) -> Refused:
        """A parameter's value Chargebee refuses (``param_wrong_value``, naming it)."""
        return Refused(self.refusal(400, "invalid_request", "param_wrong_value", message, param))

    def throttled(self, wait: float) -> Response:
        response = self.error(
            429,
            "Sorry, access has been blocked temporarily due to request count exceeding acceptable "
            "limits.",
        )
        response.headers["Retry-After"] = str(max(1, round(wait + 0.5)))
        return response

    def authorised(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        if not header.startswith("Basic "):
            return False
        try:
            user = base64.b64decode(header[6:], validate=True).decode().partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            return False
        return user == API_KEY

    def listed(self) -> list[tuple[int, dict[str, Any]]]:
        """(sequence, event) of the events Chargebee still lists (90 days), oldest first."""
        horizon = self.box.clock() - RETENTION
        return [(SEQUENCE + n, s.item["event"]) for n, s in enumerate(self.sent) if s.at >= horizon]

    async def events(self, request: Request) -> Response:
        params = self.query(request, KNOWN)
        if "sort_by[asc]" in params and "sort_by[desc]" in params:
            raise self.wrong("sort_by", "sort_by: only one sort order can be given")
        for order in ("sort_by[asc]", "sort_by[desc]"):
            if order in params and params[order] != "occurred_at":
                raise self.wrong("sort_by", f"sort_by: {params[order]} cannot be sorted by")
        if (
            not params.get("limit", "10").isdigit()
            or not 1 <= int(params.get("limit", "10")) <= 100
        ):
            raise self.wrong("limit", "limit: the value should be between 1 and 100")
        size = int(params.get("limit", "10"))
        events = sorted(
            self.filtered(self.listed(), params),
            key=lambda p: (p[1]["occurred_at"], p[0]),
            reverse="sort_by[desc]" in params,
        )
        start = 0
        if "offset" in params:
            given = [_offset(seq, e) for seq, e in events]
            if params["offset"] not in given:
                raise self.wrong("offset", "offset: the value is invalid")
            start = given.index(params["offset"]) + 1
        page = events[start : start + size]
        body: dict[str, Any] = {"list": [{"event": e} for _, e in page]}
        if start + size < len(events):
            body["next_offset"] = _offset(*page[-1])
        return JSONResponse(body)

    def filtered(
        self, events: list[tuple[int, dict[str, Any]]], params: dict[str, str]
    ) -> list[tuple[int, dict[str, Any]]]:
        """The events the query's filters keep."""
        now = int(self.box.clock().timestamp())
        for key, raw in params.items():
            name, _, rest = key.partition("[")
            op = rest.rstrip("]")
            if name in ("start_time", "end_time", "occurred_at"):
                events = [p for p in events if self.timed(p[1]["occurred_at"], key, op, raw)]
            elif name in OPERATORS:
                if name == "webhook_status":  # only the last 6 days are searched by it
                    recent = now - int(WEBHOOK_STATUS_DAYS.total_seconds())
                    events = [p for p in events if p[1]["occurred_at"] >= recent]
                events = [p for p in events if self.matches(str(p[1].get(name)), key, op, raw)]
        return events

    def timed(self, at: int, key: str, op: str, raw: str) -> bool:
        try:
            bounds = [int(v) for v in values(raw)] if op == "between" else [int(raw)]
        except ValueError:
            raise self.wrong(key.partition("[")[0], f"{key}: a timestamp is expected") from None
        if op == "between" and len(bounds) != 2:
            raise self.wrong("occurred_at", f"{key}: two timestamps are expected")
        if key == "start_time":
            return at >= bounds[0]
        if key == "end_time":
            return at <= bounds[0]
        return {
            "after": lambda: at > bounds[0],
            "before": lambda: at < bounds[0],
            "on": lambda: at == bounds[0],
            "between": lambda: bounds[0] <= at <= bounds[-1],
        }[op]()

    def matches(self, value: str, key: str, op: str, raw: str) -> bool:
        if op in ("in", "not_in"):
            try:
                listed = values(raw)
            except ValueError:
                raise self.wrong(key.partition("[")[0], f"{key}: a list is expected") from None
            return (value in listed) == (op == "in")
        return {
            "is": value == raw,
            "is_not": value != raw,
            "starts_with": value.startswith(raw),
        }[op]

    async def event(self, request: Request) -> Response:
        self.query(request, ())
        found = next((e for _, e in self.listed() if e["id"] == request.path_params["id"]), None)
        if found is None:
            raise Refused(self.error(404, "Sorry, we couldn't find that resource"))
        return JSONResponse({"event": found})

    @staticmethod
    def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
        out: list[Sent] = []
        subscriptions: dict[str, dict[str, Any]] = {}  # id -> its state, as the last event left it
        for n in range(count):
            at = int((start + span * (n + rng.random()) / max(count, 1)).timestamp())
            live = [s for s in subscriptions.values() if s["status"] != "cancelled"]
            roll = rng.random()
            if not live or roll < 0.3:
                subscription = _subscription(rng, at)
                subscriptions[subscription["id"]] = subscription
                event_type = "subscription_created"
            else:
                subscription = rng.choice(sorted(live, key=lambda s: s["id"]))
                event_type = rng.choice(NEXT[subscription["status"]])
                _advance(subscription, event_type, at)
            out.append(_sent(rng, n, at, event_type, subscription))
        return out


# what may happen next to a subscription in each state (a payment, a renewal, a cancellation)
NEXT = {
    "in_trial": ("subscription_activated", "subscription_cancelled"),
    "active": ("payment_succeeded", "subscription_renewed", "subscription_cancelled"),
}


def _subscription(rng: random.Random, at: int) -> dict[str, Any]:
    trial = rng.random() < 0.4
    return {
        "id": cb_id(rng),
        "customer_id": cb_id(rng),
        "billing_period": 1,
        "billing_period_unit": "month",
        "currency_code": "USD",
        "status": "in_trial" if trial else "active",
        "created_at": at,
        "started_at": at,
        "current_term_start": at,
        "current_term_end": at + 30 * 86400,
        "updated_at": at,
        "resource_version": at * 1000,
        "deleted": False,
        "object": "subscription",
        "subscription_items": [
            {
                "item_price_id": "basic-USD-monthly",
                "item_type": "plan",
                "quantity": 1,
                "unit_price": 1000,
                "amount": 1000,
                "object": "subscription_item",
            }
        ],
    }


def _advance(subscription: dict[str, Any], event_type: str, at: int) -> None:
    """The subscription as the event leaves it."""
    if event_type == "subscription_activated":
        subscription["status"] = "active"
    elif event_type == "subscription_cancelled":
        subscription |= {"status": "cancelled", "cancelled_at": at}
    elif event_type == "subscription_renewed":
        subscription |= {"current_term_start": at, "current_term_end": at + 30 * 86400}
    subscription |= {"updated_at": at, "resource_version": at * 1000}


def _sent(rng: random.Random, n: int, at: int, event_type: str, sub: dict[str, Any]) -> Sent:
    customer = {
        "id": sub["customer_id"],
        "email": f"customer{n}@example.com",
        "auto_collection": "on",
        "created_at": sub["created_at"],
        "updated_at": at,
        "resource_version": at * 1000,
        "deleted": False,
        "object": "customer",
    }
    content: dict[str, Any] = {}
    if event_type == "payment_succeeded":
        content["transaction"] = {
            "id": f"txn_{cb_id(rng)}",
            "customer_id": customer["id"],
            "subscription_id": sub["id"],
            "type": "payment",
            "date": at,
            "amount": 1000,
            "currency_code": "USD",
            "status": "success",
            "object": "transaction",
        }
    content |= {"subscription": dict(sub), "customer": customer}
    event_id = cb_id(rng, "ev_")
    event: dict[str, Any] = {
        "id": event_id,
        "occurred_at": at,
        "source": "scheduled_job" if event_type != "subscription_created" else "api",
        "object": "event",
        "api_version": "v2",
        "content": content,
        "event_type": event_type,
    }
    delivered = {**event, "webhook_status": "scheduled"}  # as the webhook carried it
    listed = {
        **event,
        "webhook_status": "succeeded",
        "webhooks": [
            {"id": f"whv2_{cb_id(rng)}", "webhook_status": "succeeded", "object": "webhook"}
        ],
    }
    object_type = "transaction" if event_type == "payment_succeeded" else "subscription"
    return Sent(
        event_id,
        datetime.fromtimestamp(at, UTC),
        {"event": listed},
        json.dumps(delivered, separators=(",", ":")).encode(),
        {"content-type": "application/json"},
        object_type=object_type,
        object_id=content[object_type]["id"],
        status=content[object_type]["status"],
    )


def _offset(sequence: int, event: dict[str, Any]) -> str:
    """A ``next_offset`` as Chargebee writes one: the sort key's milliseconds and its own id."""
    return json.dumps([str(event["occurred_at"] * 1000), str(sequence)], separators=(",", ":"))


STAND_IN = ChargebeeStandIn
