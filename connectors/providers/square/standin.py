"""Square's ``POST /v2/events`` (SearchEvents) as the sandbox stands in for it (``/square/v2/events``).

As Square documents it (sources in :mod:`connectors.providers.square.api`): a Bearer personal access
token; a JSON body of ``cursor``, ``limit`` (1-100, default 100: ``VALUE_TOO_LOW`` /
``VALUE_TOO_HIGH`` outside) and ``query`` (``filter``: ``event_types``, ``merchant_ids``,
``location_ids``, ``created_at.start_at`` / ``end_at``; ``sort``: ``field`` ``DEFAULT``, ``order``
``ASC`` or ``DESC``); events of the last 28 days by ``created_at``; an opaque ``cursor`` valid only
with the query it was given for, and for 5 minutes; empty fields left out (no match is ``{}``);
``GET /v2/payments/{id}``, ``/v2/refunds/{id}``, ``/v2/customers/{id}``: the object's latest
state as ``{"<type>": …}`` (404 ``NOT_FOUND`` for one it never had); errors as
``{"errors": [{"category", "code", "detail", "field"}]}``; the 429 ``RATE_LIMITED`` with no
``Retry-After``.

Where Square's docs are silent the stand-in chooses, and says so: ``start_at`` is inclusive,
``end_at`` exclusive; a lapsed cursor is ``INVALID_CURSOR``; the default order is ``DESC`` (newest first); a field Square does not document
(top level, in ``query``, ``filter`` or ``sort``) and any query-string parameter are refused with
``BAD_REQUEST``, stricter than Square may be.
"""

from __future__ import annotations

import json
import random
import secrets
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from connectors.parsing import iso_time
from connectors.providers.square.api import iso
from connectors.sandbox.standin import Refused, Sent, StandIn

ACCESS_TOKEN = "EAAAl3sandboxStandInPersonalAccessToken0123456789abcdefABCDEF"
RETENTION = timedelta(days=28)
CURSOR_LIFESPAN = timedelta(minutes=5)
MERCHANT = "MLEFBHHSJGVHD"
LOCATIONS = ("L88917AVBK2S5", "LQ2C7Y0J1D9KW")
API_VERSION = "2026-09-16"
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
FIELDS = {"cursor", "limit", "query"}
QUERY = {"filter", "sort"}
FILTER = {"event_types", "merchant_ids", "location_ids", "created_at"}
SORT = {"field", "order"}
OBJECTS = ("payment", "refund", "customer")  # the objects read by id (GET /v2/<type>s/{id})
FILTERED = {"event_types": "type", "merchant_ids": "merchant_id", "location_ids": "location_id"}


def square_id(rng: random.Random) -> str:
    """A Square object id: 29 letters and digits, as payments' and refunds' ids look."""
    return "".join(rng.choice(ALNUM) for _ in range(29))


def bad(code: str, detail: str, field: str | None = None) -> Refused:
    """A 400 in Square's shape: ``errors`` of category ``INVALID_REQUEST_ERROR``."""
    error = {"category": "INVALID_REQUEST_ERROR", "code": code, "detail": detail}
    return Refused(JSONResponse({"errors": [error | ({"field": field} if field else {})]}, 400))


def only(value: Any, known: set[str], where: str) -> Mapping[str, Any]:
    """A JSON object of documented fields only (null is a field left out)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise bad("INVALID_VALUE", f"Expected an object for `{where}`.", where)
    for name in value:
        if name not in known:
            path = f"{where}.{name}" if where else str(name)
            raise bad("BAD_REQUEST", f"Unrecognized field `{path}`.", path)
    return value


class SquareStandIn(StandIn):
    kind = "square"
    list_path = "/v2/events"
    credentials = {"api_key_env": ACCESS_TOKEN}
    object_type = "payment"
    status_path = "payment.status"  # in the record's object: data.object

    def __init__(self, box: Any) -> None:
        super().__init__(box)
        # each cursor given: the query it continues, the sort key of its page's last event, and
        # when it was given
        self.cursors: dict[str, tuple[str, tuple[str, str], datetime]] = {}

    def routes(self) -> list[BaseRoute]:
        # GET is routed too, so that it is refused as Square refuses it rather than by the router
        return [
            self.route("/v2/events", self.search, methods=("POST", "GET")),
            *(self.route(f"/v2/{kind}s/{{id}}", self.read_object) for kind in OBJECTS),
        ]

    def error(self, status: int, message: str) -> Response:
        category, code = {
            401: ("AUTHENTICATION_ERROR", "UNAUTHORIZED"),
            403: ("AUTHENTICATION_ERROR", "FORBIDDEN"),
            405: ("INVALID_REQUEST_ERROR", "METHOD_NOT_ALLOWED"),
            429: ("RATE_LIMIT_ERROR", "RATE_LIMITED"),
        }.get(status, ("INVALID_REQUEST_ERROR", "BAD_REQUEST"))
        return JSONResponse(
            {"errors": [{"category": category, "code": code, "detail": message}]}, status
        )

    def throttled(self, wait: float) -> Response:
        # Square documents no Retry-After: its advice is exponential backoff with jitter
        return self.error(429, "Rate limit exceeded. Retry the request later.")

    def authorised(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {ACCESS_TOKEN}"

    async def search(self, request: Request) -> Response:
        self.query(request, ())  # Square documents no query-string parameter here
        if request.method != "POST":
            raise Refused(self.error(405, f"{request.method} is not allowed on /v2/events."))
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            raise bad("EXPECTED_JSON_BODY", "The request body is not valid JSON.") from None
        if not isinstance(body, Mapping):
            raise bad("EXPECTED_JSON_BODY", "The request body must be a JSON object.")
        only(body, FIELDS, "")
        size = self.limit(body.get("limit"))
        query = only(body.get("query"), QUERY, "query")
        wanted = only(query.get("filter"), FILTER, "query.filter")
        sort = only(query.get("sort"), SORT, "query.sort")
        if sort.get("field", "DEFAULT") != "DEFAULT":
            raise bad("INVALID_ENUM_VALUE", "Expected `field` to be DEFAULT.", "query.sort.field")
        order = sort.get("order", "DESC")
        if order not in ("ASC", "DESC"):
            raise bad("INVALID_ENUM_VALUE", "Expected ASC or DESC.", "query.sort.order")
        events = self.matching(wanted)
        events.sort(key=lambda e: (e["created_at"], e["event_id"]), reverse=order == "DESC")
        key = json.dumps(query, sort_keys=True)
        if (cursor := body.get("cursor")) is not None:
            events = self.after(cursor, key, events, descending=order == "DESC")
        page, more = events[:size], len(events) > size
        answer: dict[str, Any] = {}
        if page:
            answer["events"] = page
            answer["metadata"] = [
                {"event_id": e["event_id"], "api_version": API_VERSION} for e in page
            ]
        if more:
            token = secrets.token_urlsafe(48)
            last = (page[-1]["created_at"], page[-1]["event_id"])
            self.cursors[token] = (key, last, self.box.clock())
            answer["cursor"] = token
        return JSONResponse(answer)

    @staticmethod
    def limit(value: Any) -> int:
        if value is None:
            return 100
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad("INVALID_VALUE", "Expected an integer for `limit`.", "limit")
        if value < 1:
            raise bad("VALUE_TOO_LOW", "`limit` must be greater than or equal to 1.", "limit")
        if value > 100:
            raise bad("VALUE_TOO_HIGH", "`limit` must be less than or equal to 100.", "limit")
        return value

    def matching(self, wanted: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The events within the retention that the filter asks for."""
        horizon = self.box.clock() - RETENTION
        span = only(wanted.get("created_at"), {"start_at", "end_at"}, "query.filter.created_at")
        bounds = {}
        for name in ("start_at", "end_at"):
            if span.get(name) is not None:
                at = iso_time(span[name]) if isinstance(span[name], str) else None
                if at is None:
                    raise bad(
                        "INVALID_TIME",
                        f"`{name}` is not an RFC 3339 time.",
                        f"query.filter.created_at.{name}",
                    )
                bounds[name] = at
        if (
            bounds.get("end_at")
            and bounds.get("start_at")
            and bounds["end_at"] < bounds["start_at"]
        ):
            raise bad("INVALID_TIME_RANGE", "`end_at` is before `start_at`.", "created_at")
        lists = {}
        for name, path in FILTERED.items():
            if wanted.get(name) is not None:
                if not isinstance(wanted[name], list):
                    raise bad("INVALID_VALUE", f"Expected an array for `{name}`.", name)
                lists[path] = set(map(str, wanted[name]))
        out = []
        for sent in self.sent:
            if sent.at < horizon or sent.at < bounds.get("start_at", sent.at):
                continue
            if "end_at" in bounds and sent.at >= bounds["end_at"]:
                continue
            if all(sent.item.get(path) in allowed for path, allowed in lists.items()):
                out.append(sent.item)
        return out

    def after(
        self, cursor: Any, key: str, events: list[dict[str, Any]], *, descending: bool
    ) -> list[dict[str, Any]]:
        """The events after the cursor's page, by their sort key (an event that left the
        retention meanwhile moves nothing)."""
        given = self.cursors.get(cursor) if isinstance(cursor, str) and len(cursor) <= 256 else None
        if given is None:
            raise bad("INVALID_CURSOR", "The pagination cursor is invalid.", "cursor")
        if self.box.clock() - given[2] > CURSOR_LIFESPAN:
            raise bad("INVALID_CURSOR", "The pagination cursor has expired.", "cursor")
        if given[0] != key:
            # Square: "To retrieve additional pages using a cursor, you must use the original query"
            raise bad("INVALID_CURSOR", "The cursor was issued for a different query.", "cursor")
        last = given[1]
        if descending:
            return [e for e in events if (e["created_at"], e["event_id"]) < last]
        return [e for e in events if (e["created_at"], e["event_id"]) > last]

    async def read_object(self, request: Request) -> Response:
        self.query(request, ())
        kind = request.url.path.rstrip("/").split("/")[-2][:-1]  # /v2/payments/{id}: payment
        wanted = request.path_params["id"]
        found = [s for s in self.sent if s.object_type == kind and s.object_id == wanted]
        if not found:
            error = {"category": "INVALID_REQUEST_ERROR", "code": "NOT_FOUND"}
            detail = f"Could not find {kind} with id {wanted}."
            return JSONResponse({"errors": [error | {"detail": detail}]}, 404)
        return JSONResponse({kind: found[-1].item["data"]["object"][kind]})

    @staticmethod
    def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
        out: list[Sent] = []
        payments: list[tuple[str, str]] = []  # (id, order id) of payments still approved
        for n in range(count):
            at = start + span * (n + rng.random()) / max(count, 1)
            roll = rng.random()
            if roll < 0.2:
                kind, obj = "customer", customer(rng, at)
                event_type = "customer.created"
            elif roll < 0.55 and payments:
                kind, (pid, order) = "payment", payments.pop(rng.randrange(len(payments)))
                obj, event_type = payment(rng, at, pid, order, "COMPLETED"), "payment.updated"
            else:
                kind, pid, order = "payment", square_id(rng), square_id(rng)[:26]
                obj, event_type = payment(rng, at, pid, order, "APPROVED"), "payment.created"
                payments.append((pid, order))
            location = obj.get("location_id", LOCATIONS[0])
            item: dict[str, Any] = {
                "merchant_id": MERCHANT,
                "location_id": location,
                "type": event_type,
                "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "created_at": iso(at),
                "data": {"type": kind, "id": obj["id"], "object": {kind: obj}},
            }
            # the webhook's body: the same event, without the list's location_id
            delivered = {k: v for k, v in item.items() if k != "location_id"}
            out.append(
                Sent(
                    item["event_id"],
                    at,
                    item,
                    json.dumps(delivered, separators=(",", ":")).encode(),
                    {
                        "content-type": "application/json",
                        "square-initial-delivery-timestamp": iso(at),
                    },
                    object_type=kind,
                    object_id=obj["id"],
                    status=obj.get("status"),
                )
            )
        return out


def payment(rng: random.Random, at: datetime, pid: str, order: str, status: str) -> dict[str, Any]:
    money = {"amount": rng.choice((500, 1200, 2599, 4800)), "currency": "USD"}
    return {
        "id": pid,
        "created_at": iso(at),
        "updated_at": iso(at),
        "amount_money": money,
        "total_money": money,
        "status": status,
        "source_type": "CARD",
        "location_id": rng.choice(LOCATIONS),
        "order_id": order,
        "version_token": "".join(rng.choice(ALNUM) for _ in range(43)),
    }


def customer(rng: random.Random, at: datetime) -> dict[str, Any]:
    return {
        "id": "".join(rng.choice("ABCDEFGHJKMNPQRSTVWXYZ0123456789") for _ in range(26)),
        "created_at": iso(at),
        "updated_at": iso(at),
        "given_name": rng.choice(("Sam", "Ana", "Kofi", "Mei")),
        "family_name": "Sample",
        "email_address": "sam@example.com",
        "version": 0,
    }


STAND_IN = SquareStandIn
