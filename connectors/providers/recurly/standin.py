"""Recurly's V3 lists as the sandbox stands in for them (``/recurly/accounts``, ``/subscriptions``,
``/invoices``, and each object by id).

As the Recurly V3 OpenAPI (v2021-02-25) documents them (sources in
``connectors.providers.recurly.api``): HTTP Basic with the API key as the username and an empty
password (401 ``unauthorized`` otherwise); an ``Accept: application/vnd.recurly.v2021-02-25`` header
(or ``+json``; 406 ``invalid_api_version`` otherwise); each list's documented parameters only
(``ids``, ``limit`` 1-200 default 20, ``order`` default ``desc``, ``sort`` ``created_at`` (the
default) or ``updated_at``, ``begin_time``/``end_time`` inclusive on the sort field, and its own
filters), anything else refused (400 ``bad_request``), ``ids`` with any other parameter refused;
``cursor`` only as a ``next`` path gave it; ``{"object": "list", "has_more", "next", "data"}``;
errors as ``{"error": {"type", "message", "params"}}``; ``X-RateLimit-*`` headers on every answer
and the 429 ``rate_limited``. Nothing expires: every object stays listed.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import random
import string
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from connectors.parsing import iso_time
from connectors.sandbox.standin import Refused, Sent, StandIn

API_KEY = "a2c5f6b0e3d94c1fb7e8d0a6c4b2e9f1"
VERSIONS = ("application/vnd.recurly.v2021-02-25", "application/vnd.recurly.v2021-02-25+json")
SITE = "r23khg9b5kyb"
LIMIT = 2000  # a sandbox site's requests in five minutes (X-RateLimit-Limit)
WINDOW = 300.0  # Recurly counts over a sliding five minutes
COMMON = ("ids", "limit", "order", "sort", "begin_time", "end_time", "cursor")
FILTERS = {
    "accounts": ("email", "subscriber", "past_due"),
    "subscriptions": ("state",),
    "invoices": ("state", "type"),
}
OBJECT = {"accounts": "account", "subscriptions": "subscription", "invoices": "invoice"}
ID_CHARS = string.ascii_lowercase + string.digits
ERROR_TYPES = {400: "bad_request", 401: "unauthorized", 403: "invalid_permissions"}
ERROR_TYPES |= {404: "not_found", 406: "invalid_api_version", 429: "rate_limited"}


def recurly_id(rng: random.Random) -> str:
    return "".join(rng.choice(ID_CHARS) for _ in range(12))


def stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _account(rng: random.Random, n: int, created: str, updated: str) -> dict[str, Any]:
    return {
        "id": recurly_id(rng),
        "object": "account",
        "code": f"customer-{1000 + n}",
        "state": "active",
        "email": f"customer{1000 + n}@example.com",
        "first_name": "Verena",
        "last_name": "Example",
        "has_live_subscription": rng.random() < 0.7,
        "has_past_due_invoice": False,
        "created_at": created,
        "updated_at": updated,
        "deleted_at": None,
    }


def _subscription(rng: random.Random, n: int, created: str, updated: str) -> dict[str, Any]:
    state = rng.choices(("active", "canceled", "expired", "paused"), (8, 2, 1, 1))[0]
    amount = rng.choice((9.0, 19.0, 49.0))
    owner = _account(rng, n, created, created)
    return {
        "id": recurly_id(rng),
        "object": "subscription",
        "uuid": "".join(rng.choice("0123456789abcdef") for _ in range(32)),
        "account": {k: owner[k] for k in ("id", "object", "code", "email", "first_name")},
        "plan": {"id": recurly_id(rng), "object": "plan", "code": "gold", "name": "Gold"},
        "state": state,
        "currency": "USD",
        "unit_amount": amount,
        "quantity": 1,
        "subtotal": amount,
        "total": amount,
        "collection_method": "automatic",
        "auto_renew": state == "active",
        "created_at": created,
        "updated_at": updated,
        "activated_at": created,
        "canceled_at": updated if state == "canceled" else None,
    }


def _invoice(rng: random.Random, n: int, created: str, updated: str) -> dict[str, Any]:
    state = rng.choices(("paid", "past_due", "pending"), (6, 1, 1))[0]
    total = rng.choice((9.0, 19.0, 49.0))
    return {
        "id": recurly_id(rng),
        "object": "invoice",
        "type": "charge",
        "origin": "renewal",
        "state": state,
        "number": str(1000 + n),
        "currency": "USD",
        "total": total,
        "paid": total if state == "paid" else 0.0,
        "balance": 0.0 if state == "paid" else total,
        "created_at": created,
        "updated_at": updated,
        "closed_at": updated if state == "paid" else None,
    }


# (the list, its object built, the webhook's object_type and event_type for it)
MAKERS = (
    ("subscriptions", _subscription, 2),
    ("accounts", _account, 1),
    ("invoices", _invoice, 1),
)


def notification(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The JSON webhook an object's last change sent: its object_type and the document (fields as
    in https://docs.recurly.com/v1.3/docs/subscription-notifications and its siblings)."""
    if item["object"] == "invoice":
        kind = f"{item['type']}_invoice"
        event = {"paid": "paid", "past_due": "past_due"}.get(item["state"], "created")
        extra: dict[str, Any] = {"invoice_number": int(item["number"])}
    elif item["object"] == "subscription":
        kind, extra = "subscription", {"uuid": item["uuid"]}
        event = item["state"] if item["state"] in ("canceled", "expired", "paused") else "renewed"
    else:
        kind, event, extra = "account", "updated", {"account_code": item["code"]}
    document = {"id": item["id"], "object_type": kind, "site_id": SITE, "event_type": event}
    return kind, {**document, "event_time": item["updated_at"], **extra}


class RecurlyStandIn(StandIn):
    kind = "recurly"
    list_path = "/subscriptions"
    credentials = {"api_key_env": API_KEY}
    object_type = "subscription"
    status_path = "state"
    # its connector's records are the objects' states, matched with the inbox by object (Recurly's
    # webhooks carry no event id): ``<object_type>:<object_id>``, not ``Sent.event_id``
    by_object = True

    def __init__(self, box: Any) -> None:
        super().__init__(box)
        self.issued: set[str] = set()  # the cursors its next paths gave
        self.calls: collections.deque[float] = collections.deque()  # answered, last five minutes

    def routes(self) -> list[BaseRoute]:
        out: list[BaseRoute] = []
        for name in OBJECT:
            out.append(self.route(f"/{name}", self._lister(name)))
            out.append(self.route(f"/{name}/{{object_id}}", self._reader(name)))
        return out

    def headers(self) -> dict[str, str]:
        """Every answer's headers: the site's count over the sliding five minutes, as Recurly
        reports it (a sandbox site: 400 a minute, 2,000 in five; recurly-client-php
        ``tests/mock_client.php`` answers ``X-RateLimit-Limit: 2000`` and a reset five minutes on)."""
        now = time.time()
        while self.calls and self.calls[0] <= now - WINDOW:
            self.calls.popleft()
        self.calls.append(now)
        return {
            "Recurly-Version": "recurly.v2021-02-25",
            "X-Request-Id": f"{random.getrandbits(64):016x}",
            "X-RateLimit-Limit": str(LIMIT),
            "X-RateLimit-Remaining": str(max(0, LIMIT - len(self.calls))),
            "X-RateLimit-Reset": str(int(self.calls[0] + WINDOW)),
        }

    def error(self, status: int, message: str, param: str | None = None) -> Response:
        error: dict[str, Any] = {"type": ERROR_TYPES.get(status, "bad_request"), "message": message}
        if param:
            error["params"] = [{"param": param, "message": message}]
        return JSONResponse({"error": error}, status_code=status, headers=self.headers())

    def throttled(self, wait: float) -> Response:
        response = self.error(
            429, "You have made too many API requests in the last five minutes. Please wait."
        )
        response.headers["X-RateLimit-Remaining"] = "0"
        response.headers["X-RateLimit-Reset"] = str(int(time.time() + wait) + 1)
        return response

    def authorised(self, request: Request) -> bool:
        expected = base64.b64encode(f"{API_KEY}:".encode()).decode()
        return request.headers.get("authorization") == f"Basic {expected}"

    async def admit(self, request: Request) -> None:
        await super().admit(request)
        if request.headers.get("accept") not in VERSIONS:
            raise Refused(
                self.error(
                    406,
                    "That accept header isn't in the format we use to specify an API version.",
                )
            )

    def _objects(self, name: str) -> list[dict[str, Any]]:
        return [s.item for s in self.sent if s.item["object"] == OBJECT[name]]

    def _reader(self, name: str) -> Any:
        async def read(request: Request) -> Response:
            self.query(request, ())
            wanted = request.path_params["object_id"]
            for item in self._objects(name):
                if item["id"] == wanted:
                    return JSONResponse(item, headers=self.headers())
            raise Refused(self.error(404, f"Couldn't find {OBJECT[name]} with id = {wanted}"))

        return read

    def _lister(self, name: str) -> Any:
        async def listing(request: Request) -> Response:
            params = self.query(request, (*COMMON, *FILTERS[name]))
            objects = self._objects(name)
            if "ids" in params:
                if len(params) > 1:
                    raise Refused(
                        self.error(400, "ids cannot be used with other parameters", "ids")
                    )
                wanted = set(params["ids"].split(","))
                data = [o for o in objects if o["id"] in wanted]
                return self._page(data, None)
            size = self.size(params, "limit", 20, 200)
            order, sort = params.get("order", "desc"), params.get("sort", "created_at")
            if order not in ("asc", "desc"):
                raise Refused(self.error(400, "order must be asc or desc", "order"))
            if sort not in ("created_at", "updated_at"):
                raise Refused(self.error(400, "sort must be created_at or updated_at", "sort"))
            objects = [o for o in objects if self._kept(o, params)]
            for bound, keep in (("begin_time", 1), ("end_time", -1)):
                if bound in params:
                    at = iso_time(params[bound])
                    if at is None:
                        raise Refused(self.error(400, f"{bound} is not an ISO 8601 time", bound))
                    objects = [o for o in objects if _cmp(iso_time(o[sort]), at) != -keep]

            def key(o: dict[str, Any]) -> tuple[float, str]:
                when = iso_time(o[sort])
                return (when.timestamp() if when else 0.0, o["id"])

            objects.sort(key=key, reverse=order == "desc")
            if "cursor" in params:
                token = params["cursor"]
                if token not in self.issued:
                    raise Refused(self.error(400, "Invalid cursor", "cursor"))
                last_id, _, epoch = token.partition(":")
                mark = (float(epoch), last_id)
                ahead = order == "asc"  # the page after the mark, in the list's order
                objects = [o for o in objects if (key(o) > mark if ahead else key(o) < mark)]
            page = objects[:size]
            following = None
            if len(objects) > size:
                token = f"{page[-1]['id']}:{key(page[-1])[0]:.6f}"
                self.issued.add(token)
                rest = [(k, v) for k, v in params.items() if k not in ("cursor", "limit")]
                following = f"/{name}?" + urlencode([("cursor", token), ("limit", size), *rest])
            return self._page(page, following)

        return listing

    def size(self, params: Any, name: str, default: int, most: int) -> int:
        raw = params.get(name)
        if raw is not None and (not raw.isdigit() or not 1 <= int(raw) <= most):
            raise Refused(self.error(400, f"{name} must be between 1 and {most}", name))
        return int(raw) if raw is not None else default

    @staticmethod
    def _kept(o: dict[str, Any], params: dict[str, str]) -> bool:
        """The list's own filters."""
        if "email" in params and o.get("email") != params["email"]:
            return False
        if (
            "subscriber" in params
            and str(o.get("has_live_subscription")).lower() != params["subscriber"]
        ):
            return False
        if (
            "past_due" in params
            and str(o.get("has_past_due_invoice")).lower() != params["past_due"]
        ):
            return False
        if "type" in params and params["type"] not in (o.get("type"), "non-legacy"):
            return False
        live = ("active", "canceled", "future", "paused")
        state = params.get("state")
        return (
            state is None or o.get("state") == state or (state == "live" and o.get("state") in live)
        )

    def _page(self, data: list[dict[str, Any]], following: str | None) -> Response:
        body = {
            "object": "list",
            "has_more": following is not None,
            "next": following,
            "data": data,
        }
        return JSONResponse(body, headers=self.headers())

    @staticmethod
    def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
        out = []
        weights = [m[2] for m in MAKERS]
        for n in range(count):
            at = (start + span * (n + rng.random() * 0.5) / max(count, 1)).replace(microsecond=0)
            created = stamp(at - timedelta(days=rng.randint(1, 60)))
            _, make, _ = rng.choices(MAKERS, weights)[0]
            item = make(rng, n, created, stamp(at))
            kind, document = notification(item)
            body = json.dumps(document, separators=(",", ":")).encode()
            out.append(
                Sent(
                    "recurly:" + hashlib.sha256(body).hexdigest(),  # as the receiver names it
                    at,
                    item,
                    body,
                    {"content-type": "application/json"},
                    object_type=kind,
                    object_id=item["id"],
                    status=item.get("state"),
                )
            )
        return out


def _cmp(a: datetime | None, b: datetime) -> int:
    if a is None:
        return -1
    return (a > b) - (a < b)


STAND_IN = RecurlyStandIn
