"""PayPal's REST API as the sandbox stands in for it (``/paypal/…``): what a ``paypal`` source calls.

As PayPal documents it (sources in :mod:`connectors.providers.paypal.api`):

- ``POST /v1/oauth2/token``: HTTP Basic ``client_id:secret``, ``grant_type=client_credentials``;
  a Bearer token lasting ``expires_in`` 32400 seconds; other credentials ``401 invalid_client``.
- ``GET /v1/notifications/webhooks-events`` (a trailing slash too, as PayPal's SDKs and links
  write it): ``page_size`` (default 10), ``start_time`` / ``end_time`` (inclusive, RFC 3339),
  ``event_type``, ``transaction_id``; the next page is a ``links`` entry ``rel: next`` carrying
  ``move_to=next&index_time=…&index_id=…`` as PayPal's samples show, refused when it was never
  given or is sent with another query; events of the last 30 days, newest first.
- ``GET /v1/notifications/webhooks-events/{id}``, ``POST /v1/notifications/verify-webhook-signature``
  (``SUCCESS`` only for a transmission this PayPal signed, for that webhook id and the event's
  bytes), ``GET /v2/payments/captures/{id}`` (the capture as it is now).
- Errors ``{"name", "message", "debug_id", "details", "links"}``; the 429 ``RATE_LIMIT_REACHED``
  with no ``Retry-After``.

Where PayPal is silent the stand-in chooses, and says so: ``page_size`` above 300 is refused (no
maximum is documented); newest first; an unknown parameter is ``400 INVALID_REQUEST``. Being
PayPal, it signs its deliveries with a key of its own (HMAC-SHA256 stands in for PayPal's RSA key:
only PayPal ever checks its signature, through the verify call).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import random
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from connectors.parsing import iso_time
from connectors.providers.paypal.api import LIST_PATH, TOKEN_PATH
from connectors.sandbox.standin import Refused, Sent, StandIn

CLIENT_ID = "AeSandboxStandInClientId0123456789abcdefghijklmnopqrstuvwxyzABCDEF"
CLIENT_SECRET = "EKSandboxStandInSecret0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
WEBHOOK_ID = "4JH86294D6297924G"
SIGNING_KEY = b"the sandbox's PayPal signing key"
CERT_URL = "https://api.sandbox.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77"
RETENTION = timedelta(days=30)
PAGING = ("move_to", "index_time", "index_id")
QUERY = ("page_size", "start_time", "end_time", "transaction_id", "event_type", *PAGING)
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
DOCS = "https://developer.paypal.com/docs/api/webhooks/v1/"
VERIFY_FIELDS = (
    "auth_algo",
    "cert_url",
    "transmission_id",
    "transmission_sig",
    "transmission_time",
    "webhook_id",
)


def paypal_id(rng: random.Random, n: int = 17) -> str:
    return "".join(rng.choice(ALNUM) for _ in range(n))


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def compact(value: Any) -> bytes:
    """An event's bytes as a verify call carries them (httpx's JSON: compact, UTF-8)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def signature(transmission_id: str, at: str, webhook_id: str, event: Any) -> str:
    """What this PayPal signs: ``<transmission id>|<time>|<webhook id>|<CRC32 of the body>``."""
    message = f"{transmission_id}|{at}|{webhook_id}|{binascii.crc32(compact(event)) & 0xFFFFFFFF}"
    return base64.b64encode(
        hmac.new(SIGNING_KEY, message.encode(), hashlib.sha256).digest()
    ).decode()


def failure(status: int, name: str, message: str, field: str | None = None) -> Refused:
    body: dict[str, Any] = {"name": name, "message": message, "debug_id": uuid.uuid4().hex[:13]}
    if field:
        body["details"] = [{"field": field, "location": "query", "issue": "INVALID_PARAMETER"}]
    body["links"] = [{"href": f"{DOCS}#errors", "rel": "information_link"}]
    return Refused(JSONResponse(body, status))


class PayPalStandIn(StandIn):
    kind = "paypal"
    list_path = LIST_PATH
    credentials = {"client_id_env": CLIENT_ID, "client_secret_env": CLIENT_SECRET}
    source_keys = {"webhook_id": WEBHOOK_ID}
    object_type = "capture"
    status_path = "status"  # in the record's object: the event's resource

    def __init__(self, box: Any) -> None:
        super().__init__(box)
        self.tokens: set[str] = set()
        # each next link given: its query (without the paging) -> the last event of its page
        self.pages: dict[tuple[str, str, str], tuple[str, str]] = {}

    def routes(self) -> list[BaseRoute]:
        events = "/v1/notifications/webhooks-events"
        return [
            self.route(TOKEN_PATH, self.token, methods=("POST",)),
            self.route(events, self.events),
            self.route(f"{events}/", self.events),
            self.route(f"{events}/{{id}}", self.event),
            self.route(
                "/v1/notifications/verify-webhook-signature", self.verify, methods=("POST",)
            ),
            self.route("/v2/payments/captures/{id}", self.capture),
        ]

    def error(self, status: int, message: str) -> Response:
        if status == 401:  # as PayPal answers a missing or unknown token
            return JSONResponse({"error": "invalid_token", "error_description": message}, 401)
        name = {429: "RATE_LIMIT_REACHED", 404: "RESOURCE_NOT_FOUND"}.get(status, "INVALID_REQUEST")
        return failure(status, name, message).response

    def throttled(self, wait: float) -> Response:
        # PayPal documents the name, and a Retry-After only "if available": none here
        return self.error(429, "Too many requests. Blocked due to rate limiting.")

    def authorised(self, request: Request) -> bool:
        given = request.headers.get("authorization", "")
        if request.url.path.endswith(TOKEN_PATH):
            basic = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
            return given == f"Basic {basic}"
        return given.startswith("Bearer ") and given[7:] in self.tokens

    async def admit(self, request: Request) -> None:
        try:
            await super().admit(request)
        except Refused as refused:
            if refused.response.status_code == 401 and request.url.path.endswith(TOKEN_PATH):
                answer = {
                    "error": "invalid_client",
                    "error_description": "Client Authentication failed",
                }
                raise Refused(JSONResponse(answer, 401)) from None
            raise

    async def token(self, request: Request) -> Response:
        form = dict(await request.form())
        if form.get("grant_type") != "client_credentials" or set(form) - {"grant_type", "scope"}:
            return JSONResponse({"error": "unsupported_grant_type"}, 400)
        token = f"A21AA{uuid.uuid4().hex}{uuid.uuid4().hex}"
        self.tokens.add(token)
        return JSONResponse(
            {
                "scope": "https://uri.paypal.com/services/applications/webhooks "
                "https://uri.paypal.com/services/payments/payment/authcapture",
                "access_token": token,
                "token_type": "Bearer",
                "app_id": "APP-80W284485P519543T",
                "expires_in": 32400,
                "nonce": f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}{uuid.uuid4().hex[:20]}",
            }
        )

    async def events(self, request: Request) -> Response:
        params = self.query(request, QUERY)
        size = self.size(params, "page_size", 10, 300)
        bounds = {}
        for name in ("start_time", "end_time"):
            if name in params:
                if (at := iso_time(params[name])) is None:
                    raise failure(400, "INVALID_REQUEST", f"{name} is not a date-time", name)
                bounds[name] = at
        horizon = self.box.clock() - RETENTION
        listed = [
            s.item
            for s in self.sent
            if s.at >= max(horizon, bounds.get("start_time", horizon))
            and ("end_time" not in bounds or s.at <= bounds["end_time"])
            and params.get("event_type", s.item["event_type"]) == s.item["event_type"]
            and params.get("transaction_id", s.item["resource"]["id"]) == s.item["resource"]["id"]
        ]
        listed.sort(key=lambda e: (e["create_time"], e["id"]), reverse=True)
        query = {k: v for k, v in params.items() if k not in PAGING}
        key = json.dumps(query, sort_keys=True)
        if any(name in params for name in PAGING):
            given = (key, params.get("index_time", ""), params.get("index_id", ""))
            last = self.pages.get(given)
            if params.get("move_to") != "next" or last is None:
                raise failure(
                    400, "INVALID_REQUEST", "The paging parameters are not valid.", "index_id"
                )
            listed = [e for e in listed if (e["create_time"], e["id"]) < last]
            offset = int(given[2])
        else:
            offset = 0
        page = listed[:size]
        links = [{"href": str(request.url), "rel": "self", "method": "GET"}]
        if len(listed) > size:
            at, index = page[-1]["create_time"], str(offset + size)
            self.pages[(key, at, index)] = (page[-1]["create_time"], page[-1]["id"])
            following = {**query, "move_to": "next", "index_time": at, "index_id": index}
            href = str(request.url.replace(query=urlencode(following)))
            links.append({"href": href, "rel": "next", "method": "GET"})
        return JSONResponse({"events": page, "count": len(page), "links": links})

    async def event(self, request: Request) -> Response:
        self.query(request, ())
        wanted = request.path_params["id"]
        for sent in self.sent:
            if sent.event_id == wanted:
                return JSONResponse(sent.item)
        raise failure(404, "RESOURCE_NOT_FOUND", "The specified resource does not exist.")

    async def verify(self, request: Request) -> Response:
        self.query(request, ())
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        fields = VERIFY_FIELDS
        if not isinstance(body, Mapping) or not all(isinstance(body.get(f), str) for f in fields):
            raise failure(400, "VALIDATION_ERROR", "Invalid request - see details.", "body")
        if not isinstance(body.get("webhook_event"), Mapping):
            raise failure(
                400, "VALIDATION_ERROR", "Invalid request - see details.", "webhook_event"
            )
        expected = signature(
            body["transmission_id"],
            body["transmission_time"],
            body["webhook_id"],
            body["webhook_event"],
        )
        good = hmac.compare_digest(expected, body["transmission_sig"])
        return JSONResponse({"verification_status": "SUCCESS" if good else "FAILURE"})

    async def capture(self, request: Request) -> Response:
        self.query(request, ())
        wanted = request.path_params["id"]
        found = [s for s in self.sent if s.object_type == "capture" and s.object_id == wanted]
        if not found:
            raise failure(404, "RESOURCE_NOT_FOUND", "The specified resource does not exist.")
        return JSONResponse(found[-1].item["resource"])

    @staticmethod
    def history(rng: random.Random, count: int, start: datetime, span: timedelta) -> list[Sent]:
        out: list[Sent] = []
        pending: list[dict[str, Any]] = []  # captures still pending: a later event completes one
        for n in range(count):
            at = start + span * (n + rng.random()) / max(count, 1)
            roll = rng.random()
            if roll < 0.15:
                kind, event_type, resource = (
                    "checkout-order",
                    "CHECKOUT.ORDER.APPROVED",
                    order(rng, at),
                )
                summary = "An order has been approved by buyer"
            elif roll < 0.45 and pending:
                resource = {**pending.pop(rng.randrange(len(pending))), "status": "COMPLETED"}
                resource["update_time"] = iso(at)[:19] + "Z"
                kind, event_type = "capture", "PAYMENT.CAPTURE.COMPLETED"
                summary = f"Payment completed for $ {resource['amount']['value']} USD"
            else:
                resource = capture(rng, at, rng.choice(("PENDING", "COMPLETED")))
                kind = "capture"
                event_type = f"PAYMENT.CAPTURE.{resource['status']}"
                summary = (
                    f"Payment {resource['status'].lower()} for $ {resource['amount']['value']} USD"
                )
                if resource["status"] == "PENDING":
                    pending.append(resource)
            event_id = f"WH-{paypal_id(rng)}-{paypal_id(rng)}"
            base = "https://api.sandbox.paypal.com/v1/notifications/webhooks-events"
            item: dict[str, Any] = {
                "id": event_id,
                "event_version": "1.0",
                "create_time": iso(at),
                "resource_type": kind,
                "resource_version": "2.0",
                "event_type": event_type,
                "summary": summary,
                "resource": resource,
                "links": [
                    {"href": f"{base}/{event_id}", "rel": "self", "method": "GET"},
                    {"href": f"{base}/{event_id}/resend", "rel": "resend", "method": "POST"},
                ],
            }
            transmission = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            sent_at = iso(at + timedelta(seconds=2))
            headers = {
                "content-type": "application/json",
                "paypal-transmission-id": transmission,
                "paypal-transmission-time": sent_at,
                "paypal-transmission-sig": signature(transmission, sent_at, WEBHOOK_ID, item),
                "paypal-cert-url": CERT_URL,
                "paypal-auth-algo": "SHA256withRSA",
            }
            status = resource.get("status")
            out.append(
                Sent(event_id, at, item, compact(item), headers, kind, resource["id"], status)
            )
        return out


def capture(rng: random.Random, at: datetime, status: str) -> dict[str, Any]:
    value = f"{rng.choice((12, 25, 99, 200))}.00"
    stamp = iso(at)[:19] + "Z"
    return {
        "id": paypal_id(rng),
        "amount": {"currency_code": "USD", "value": value},
        "final_capture": True,
        "seller_protection": {"status": "ELIGIBLE"},
        "status": status,
        "supplementary_data": {"related_ids": {"order_id": paypal_id(rng)}},
        "create_time": stamp,
        "update_time": stamp,
    }


def order(rng: random.Random, at: datetime) -> dict[str, Any]:
    stamp = iso(at)[:19] + "Z"
    return {"id": paypal_id(rng), "intent": "CAPTURE", "status": "APPROVED", "create_time": stamp}


STAND_IN = PayPalStandIn
