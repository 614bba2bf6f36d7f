"""Mollie's payments API as the sandbox stands in for it (``/mollie/v2/payments``).

As Mollie documents it (sources in ``connectors.providers.mollie.api``): ``Authorization: Bearer`` a
``test_``/``live_`` API key; ``GET /v2/payments`` with ``from`` (a payment id it lists; the page
starts with it), ``limit`` (1 to 250, default 50; anything else refused) and ``sort`` (``desc``, the
default, newest first, or ``asc``); any other parameter refused (``profileId`` and ``testmode``
too: Mollie says an API key "must not" send them); ``count``, ``_embedded.payments`` and
``_links`` (``self``, ``previous``, ``next`` as ``?from=<the next page's first id>&limit=…``,
``documentation``), as mollie-api-python's fixtures show them. ``GET /v2/payments/{id}`` answers one
payment (the receiver's confirmation) or 404. Errors in Mollie's shape (``status``, ``title``,
``detail``, ``field``, ``_links.documentation``), ``application/hal+json``; the 429 carries no
``Retry-After`` (Mollie documents none). Every payment is kept: Mollie states no retention.
"""

from __future__ import annotations

import random
import string
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from connectors.sandbox.standin import Refused, Sent, StandIn

API_KEY = "test_dHar4XY7LxsDOtmnkVtjNVWXLSlXsM"
HAL = "application/hal+json"
DOCS = "https://docs.mollie.com/reference/list-payments"
TITLES = {
    400: "Bad Request",
    401: "Unauthorized Request",
    403: "Forbidden",
    404: "Not Found",
    429: "Too Many Requests",
}
# how a payment ends, and the field that says when (weights: most payments are paid)
ENDINGS: tuple[tuple[str, str, int], ...] = (
    ("paid", "paidAt", 14),
    ("expired", "expiredAt", 3),
    ("canceled", "canceledAt", 2),
    ("failed", "failedAt", 1),
)
METHODS = ("ideal", "creditcard", "bancontact", "paypal")
ALPHANUMERIC = string.ascii_letters + string.digits


def mollie_time(at: datetime) -> str:
    """Mollie's times: ISO 8601 to the second with the offset (``2018-03-20T09:13:37+00:00``)."""
    return at.replace(microsecond=0).isoformat()


def link(href: str) -> dict[str, str]:
    return {"href": href, "type": HAL}


def payment(rng: random.Random, at: datetime, n: int) -> dict[str, Any]:
    """A settled payment as Mollie shows it (fields as in mollie-api-python's
    ``tests/responses/payments_list.json``)."""
    status, stamp, _ = rng.choices(ENDINGS, weights=[e[2] for e in ENDINGS])[0]
    pid = "tr_" + "".join(rng.choice(ALPHANUMERIC) for _ in range(10))
    value = f"{rng.randint(5, 400)}.{rng.choice(('00', '50', '95'))}"
    amount = {"value": value, "currency": "EUR"}
    item: dict[str, Any] = {
        "resource": "payment",
        "id": pid,
        "mode": "test",
        "createdAt": mollie_time(at),
        "amount": amount,
        "description": f"Order #{10000 + n}",
        "method": rng.choice(METHODS),
        "metadata": {"order_id": str(10000 + n)},
        "status": status,
        stamp: mollie_time(at + timedelta(seconds=rng.randint(20, 180))),
        "isCancelable": False,
        "profileId": "pfl_QkEhN94Ba",
        "sequenceType": "oneoff",
        "redirectUrl": f"https://webshop.example.org/order/{10000 + n}/",
        "webhookUrl": "https://webshop.example.org/payments/webhook/",
        "_links": {
            "self": link(f"https://api.mollie.com/v2/payments/{pid}"),
            "dashboard": {
                "href": f"https://www.mollie.com/dashboard/org_12345678/payments/{pid}",
                "type": "text/html",
            },
            "documentation": {
                "href": "https://docs.mollie.com/reference/get-payment",
                "type": "text/html",
            },
        },
    }
    if status == "paid":
        item["amountRefunded"] = {"value": "0.00", "currency": "EUR"}
        item["amountRemaining"] = dict(amount)
        item["settlementAmount"] = dict(amount)
    return item


class MollieStandIn(StandIn):
    kind = "mollie"
    list_path = "/v2/payments"
    credentials = {"api_key_env": API_KEY}
    object_type = "payment"
    status_path = "status"

    def routes(self) -> list[BaseRoute]:
        return [
            self.route("/v2/payments", self.payments),
            self.route("/v2/payments/{payment_id}", self.one),
        ]

    def error(self, status: int, message: str, field: str | None = None) -> Response:
        body: dict[str, Any] = {
            "status": status,
            "title": TITLES.get(status, "Error"),
            "detail": message,
        }
        if field:
            body["field"] = field
        body["_links"] = {
            "documentation": {
                "href": "https://docs.mollie.com/overview/handling-errors",
                "type": "text/html",
            }
        }
        return JSONResponse(body, status_code=status, media_type=HAL)

    def throttled(self, wait: float) -> Response:
        return self.error(
            429, "Your request has hit a rate limit. Please wait for a bit and retry."
        )

    def authorised(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {API_KEY}"

    async def admit(self, request: Request) -> None:
        if denied := await self.box._fault(request):
            raise Refused(denied)
        if not self.authorised(request):
            raise Refused(self.error(401, "Missing authentication, or failed to authenticate"))

    async def payments(self, request: Request) -> Response:
        params = self.query(request, ("from", "limit", "sort"))
        raw = params.get("limit", "50")
        if not raw.isdigit() or not 1 <= int(raw) <= 250:
            raise Refused(self.error(400, "The limit must be between 1 and 250", "limit"))
        size = int(raw)
        order = params.get("sort", "desc")
        if order not in ("asc", "desc"):
            raise Refused(self.error(400, "The sort must be asc or desc", "sort"))
        listed = [s.item for s in self.sent]  # oldest first (by creation)
        if order == "desc":
            listed.reverse()
        start = 0
        if "from" in params:
            ids = [p["id"] for p in listed]
            if params["from"] not in ids:
                raise Refused(
                    self.error(400, f"Invalid 'from' parameter: {params['from']}", "from")
                )
            start = ids.index(params["from"])
        page, rest = listed[start : start + size], listed[start + size :]
        base = request.url.remove_query_params(("from", "limit", "sort"))

        def at(first: dict[str, Any]) -> dict[str, str]:
            query: dict[str, Any] = {"from": first["id"], "limit": size}
            if "sort" in params:
                query["sort"] = order
            return link(str(base.include_query_params(**query)))

        before = listed[max(0, start - size) : start]
        return JSONResponse(
            {
                "count": len(page),
                "_embedded": {"payments": page},
                "_links": {
                    "self": link(str(request.url)),
                    "previous": at(before[0]) if before else None,
                    "next": at(rest[0]) if rest else None,
                    "documentation": {"href": DOCS, "type": "text/html"},
                },
            },
            media_type=HAL,
        )

    async def one(self, request: Request) -> Response:
        self.query(request, ())  # embed/include/testmode are not stood in for: refused
        wanted = request.path_params["payment_id"]
        for sent in self.sent:
            if sent.item["id"] == wanted:
                return JSONResponse(sent.item, media_type=HAL)
        raise Refused(self.error(404, f"No payment exists with token {wanted}."))

    @staticmethod
    def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
        out = []
        for n in range(count):
            at = start + span * (n + rng.random() * 0.5) / max(count, 1)
            item = payment(rng, at, n)
            out.append(
                Sent(
                    f"{item['id']}:{item['status']}",  # as the receiver names the notification
                    at,
                    item,
                    f"id={item['id']}".encode(),  # all Mollie's webhook carries
                    {"content-type": "application/x-www-form-urlencoded"},
                    object_type="payment",
                    object_id=item["id"],
                    status=item["status"],
                )
            )
        return out


STAND_IN = MollieStandIn
