"""GoCardless's ``GET /events`` as the sandbox stands in for it (``/gocardless/events``).

As GoCardless documents it (facts and sources: ``connectors/providers/gocardless/api.py``): a
Bearer access token and ``GoCardless-Version: 2015-07-06``; ``limit`` 1..500 (default 50), the
``after``/``before`` cursors (an event id, as ``meta.cursors`` gave it), ``created_at[gt|gte|lt|lte]``
and the documented filters (``action``, ``resource_type``, ``include`` only with ``resource_type``,
one object's id such as ``payment``, not with ``resource_type``); any other parameter refused;
newest first; events of the last 18 months; errors and the 429 in GoCardless's envelope
(``{"error": {"type", "code", "message", "errors": [{"reason", …}]}}``), the 429 with its
``RateLimit-*`` headers. GoCardless does not document what it answers for an unknown parameter, a
``limit`` over 500 or an id it never listed as a cursor: the stand-in refuses them (400), the strict
reading, so a connector that relies on them fails here first.
"""

from __future__ import annotations

import json
import random
import string
import uuid
from datetime import datetime, timedelta
from email.utils import format_datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from connectors.parsing import iso_time
from connectors.providers.gocardless.api import API_VERSION, since_param
from connectors.sandbox.standin import Refused, Sent, StandIn

ACCESS_TOKEN = "sandbox_hookledger-stand-in-access-token"  # sandbox tokens start sandbox_
RETENTION = timedelta(days=548)  # 18 months
TIME_FILTERS = ("created_at[gt]", "created_at[gte]", "created_at[lt]", "created_at[lte]")
# a filter by one object's id (links.<name>); none goes with resource_type
OBJECT_FILTERS = (
    "billing_request",
    "creditor",
    "export",
    "instalment_schedule",
    "mandate",
    "parent_event",
    "payer_authorisation",
    "payment",
    "payout",
    "refund",
    "scheme_identifier",
    "subscription",
)
KNOWN = (
    "after",
    "before",
    "limit",
    "action",
    "resource_type",
    "include",
    *TIME_FILTERS,
    *OBJECT_FILTERS,
)
ALPHABET = string.ascii_uppercase + string.digits

# a payment's life as its events tell it (GoCardless's cause for each), and a mandate's
PAYMENT_STEPS = ("created", "submitted", "confirmed", "paid_out")
CAUSES = {
    ("payments", "created"): ("api", "payment_created", "Payment created via the API."),
    ("payments", "submitted"): (
        "gocardless",
        "payment_submitted",
        "Payment submitted to the banks. As a result, it can no longer be cancelled.",
    ),
    ("payments", "confirmed"): (
        "gocardless",
        "payment_confirmed",
        "Enough time has passed since the payment was submitted for the banks to return an "
        "error, so this payment is now confirmed.",
    ),
    ("payments", "paid_out"): (
        "gocardless",
        "payment_paid_out",
        "The payment has been paid out by GoCardless.",
    ),
    ("payments", "failed"): (
        "bank",
        "insufficient_funds",
        "The customer's account had insufficient funds to make this payment.",
    ),
    ("mandates", "created"): ("api", "mandate_created", "Mandate created via the API."),
    ("mandates", "active"): (
        "gocardless",
        "mandate_activated",
        "The time window after submission for the banks to refuse a mandate has ended without "
        "any errors being received, so this mandate is now active.",
    ),
}


def gc_id(prefix: str, rng: random.Random) -> str:
    """A GoCardless id: its resource's prefix and 12 upper-case letters and digits."""
    return prefix + "".join(rng.choice(ALPHABET) for _ in range(12))


class GoCardlessStandIn(StandIn):
    kind = "gocardless"
    list_path = "/events"
    credentials = {"api_key_env": ACCESS_TOKEN}
    object_type = "payments"
    status_path = "action"  # a payment event's action is the state it moved the payment to

    def routes(self) -> list[BaseRoute]:
        return [self.route("/events", self.events), self.route("/events/{id}", self.event)]

    def refusal(self, status: int, reason: str, message: str) -> Response:
        return JSONResponse(
            {
                "error": {
                    "message": message,
                    "documentation_url": f"https://developer.gocardless.com/api-reference#{reason}",
                    "type": "invalid_api_usage",
                    "request_id": str(uuid.uuid4()),
                    "code": status,
                    "errors": [{"reason": reason, "message": message}],
                }
            },
            status_code=status,
        )

    def error(self, status: int, message: str) -> Response:
        reason = {
            401: "access_token_not_found",
            403: "insufficient_permissions",
            404: "resource_not_found",
            429: "rate_limit_exceeded",
        }
        return self.refusal(status, reason.get(status, "invalid_filters"), message)

    def throttled(self, wait: float) -> Response:
        response = self.error(429, "Rate limit exceeded")
        reset = self.box.clock() + timedelta(seconds=max(1.0, wait))
        response.headers["RateLimit-Limit"] = "1000"
        response.headers["RateLimit-Remaining"] = "0"
        response.headers["RateLimit-Reset"] = format_datetime(reset, usegmt=True)
        return response

    def authorised(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {ACCESS_TOKEN}"

    def versioned(self, request: Request) -> None:
        version = request.headers.get("gocardless-version")
        if version is None:
            raise Refused(
                self.refusal(400, "missing_version_header", "GoCardless-Version header missing")
            )
        if version != API_VERSION:
            raise Refused(self.refusal(400, "version_not_found", f"unknown version {version}"))

    def listed(self) -> list[dict[str, Any]]:
        """The events GoCardless still lists (18 months), newest first."""
        horizon = self.box.clock() - RETENTION
        kept = [s.item for s in self.sent if s.at >= horizon]
        return sorted(kept, key=lambda e: (e["created_at"], e["id"]), reverse=True)

    async def events(self, request: Request) -> Response:
        self.versioned(request)
        params = self.query(request, KNOWN)
        size = self.size(params, "limit", 50, 500)
        events = self.filtered(self.listed(), params)
        if params.get("after") and params.get("before"):
            raise Refused(self.error(400, "after and before cannot be given together"))
        ids = [e["id"] for e in events]
        for cursor in ("after", "before"):
            if params.get(cursor) and params[cursor] not in ids:
                raise Refused(self.error(400, f"{cursor}: no such cursor {params[cursor]}"))
        if "after" in params:
            start = ids.index(params["after"]) + 1
        elif "before" in params:
            start = max(0, ids.index(params["before"]) - size)
        else:
            start = 0
        end = min(start + size, ids.index(params["before"]) if "before" in params else len(ids))
        page = events[start:end]
        cursors = {
            "before": page[0]["id"] if page and start > 0 else None,
            "after": page[-1]["id"] if page and end < len(events) else None,
        }
        return JSONResponse({"events": page, "meta": {"cursors": cursors, "limit": size}})

    def filtered(
        self, events: list[dict[str, Any]], params: dict[str, str]
    ) -> list[dict[str, Any]]:
        """The events the query's filters keep (its cursors and limit aside)."""
        objects = [name for name in OBJECT_FILTERS if name in params]
        if params.get("resource_type") and objects:
            raise Refused(self.error(400, f"resource_type cannot be used with {objects[0]}"))
        if "include" in params and not params.get("resource_type"):
            raise Refused(self.error(400, "include must be used with resource_type"))
        for name in TIME_FILTERS:
            if name in params:
                at = iso_time(params[name])
                if at is None:
                    raise Refused(self.error(400, f"{name} must be an ISO 8601 date-time"))
                bound, op = since_param(at), name[len("created_at[") : -1]
                events = [e for e in events if _compare(e["created_at"], op, bound)]
        if params.get("resource_type"):
            events = [e for e in events if e["resource_type"] == params["resource_type"]]
        if params.get("action"):
            events = [e for e in events if e["action"] == params["action"]]
        for name in objects:
            events = [e for e in events if e["links"].get(name) == params[name]]
        return events

    async def event(self, request: Request) -> Response:
        self.versioned(request)
        self.query(request, ())
        wanted = request.path_params["id"]
        found = next((e for e in self.listed() if e["id"] == wanted), None)
        if found is None:
            raise Refused(self.error(404, "Resource not found"))
        return JSONResponse({"events": found})

    @staticmethod
    def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
        out: list[Sent] = []
        open_payments: dict[str, int] = {}  # payment id -> its next step
        for n in range(count):
            at = start + span * (n + rng.random()) / max(count, 1)
            if rng.random() < 0.15:
                resource, object_id = "mandates", gc_id("MD", rng)
                action = rng.choice(("created", "active"))
            elif open_payments and rng.random() < 0.6:
                resource, object_id = "payments", rng.choice(sorted(open_payments))
                step = open_payments.pop(object_id)
                action = "failed" if step == 2 and rng.random() < 0.2 else PAYMENT_STEPS[step]
                if action != "failed" and step + 1 < len(PAYMENT_STEPS):
                    open_payments[object_id] = step + 1
            else:
                resource, object_id, action = "payments", gc_id("PM", rng), "created"
                open_payments[object_id] = 1
            out.append(_sent(rng, at, resource, action, object_id))
        return out


def _compare(value: str, op: str, bound: str) -> bool:
    """``created_at`` against a filter's bound: both in one fixed ISO form, so text order is time."""
    return {
        "gt": value > bound,
        "gte": value >= bound,
        "lt": value < bound,
        "lte": value <= bound,
    }[op]


def _sent(rng: random.Random, at: datetime, resource: str, action: str, object_id: str) -> Sent:
    origin, cause, description = CAUSES[(resource, action)]
    details = {"origin": origin, "cause": cause, "description": description}
    if action == "failed":
        details |= {"scheme": "bacs", "reason_code": "ARUDD-0"}
    links = {resource[:-1]: object_id}
    if action == "paid_out":
        links["payout"] = gc_id("PO", rng)
    item: dict[str, Any] = {
        "id": gc_id("EV", rng),
        "created_at": since_param(at),
        "resource_type": resource,
        "action": action,
        "links": links,
        "details": details,
        "metadata": {},
        "resource_metadata": {},
    }
    # one delivery of this one event (GoCardless batches up to 250: the receiver splits them)
    body = {"events": [item], "meta": {"webhook_id": gc_id("WB", rng)}}
    return Sent(
        item["id"],
        at,
        item,
        json.dumps(body, separators=(",", ":")).encode(),
        {"content-type": "application/json"},
        object_type=resource,
        object_id=object_id,
        status=action,
    )


STAND_IN = GoCardlessStandIn
