"""The sandbox provider's HTTP API (Starlette).

Implements what the connectors use, with the providers' own shapes and paging:

- Stripe: ``GET /v1/events`` (``limit`` 1-100, ``starting_after`` / ``ending_before``, ``created[gte|gt|lte|lt]``,
  ``type`` with ``*`` wildcards, ``types[]``; newest first; 30-day retention), ``GET /v1/events/{id}``,
  ``GET /v1/{objects}/{id}`` and ``/v1/checkout/sessions/{id}``. Auth: ``Authorization: Bearer <key>``.
- GitHub: ``GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries``, the ``/orgs/...`` and ``/app/hook``
  variants (``per_page`` ≤ 100, opaque ``cursor`` in the ``Link`` header, newest first, 3-day retention),
  ``GET .../deliveries/{id}`` and ``POST .../deliveries/{id}/attempts``. Auth: a token, or an app JWT
  (RS256, ``iss`` = app id) for ``/app``.
- Shopify: ``GET /admin/api/{version}/orders.json`` (``updated_at_min``, ``limit`` ≤ 250, ``page_info``
  in the ``Link`` header, which can't be combined with other filters) and ``orders/{id}.json``;
  ``X-Shopify-Access-Token``; ``X-Shopify-Shop-Api-Call-Limit`` on every answer.

Fault switches (constructor or ``POST /_sandbox/faults``): 429 with ``Retry-After`` every Nth call, a burst
of 5xx, slow pages, a malformed page. ``GET /_sandbox/stats`` counts calls.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import fnmatch
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from connectors.sandbox.world import GitHubAttempt, World

STRIPE_RETENTION = timedelta(days=30)
GITHUB_RETENTION = timedelta(days=3)
STRIPE_OBJECT_PATHS = {
    "invoices": "invoice",
    "charges": "charge",
    "customers": "customer",
    "payment_intents": "payment_intent",
    "subscriptions": "subscription",
    "refunds": "refund",
}


@dataclass
class Keys:
    stripe: str = "sk_test_sandbox"
    github: str = "ghp_sandbox"
    shopify: str = "shpat_sandbox"
    github_app_id: int | None = None
    github_app_public_key: str | None = None  # PEM; JWTs are verified with it when set


@dataclass
class Faults:
    rate_limit_every: int | None = None  # every Nth API call answers 429
    retry_after: float = 1.0
    error_burst_start: int | None = None  # calls [start, start + len) answer error_status
    error_burst_len: int = 0
    error_status: int = 503
    slow_ms: int = 0
    malformed_call: int | None = None  # that API call answers a page that is not JSON


@dataclass
class Stats:
    calls: int = 0
    by_route: dict[str, int] = field(default_factory=dict)


def _stripe_error(
    status: int, message: str, code: str | None = None, param: str | None = None
) -> JSONResponse:
    error: dict[str, Any] = {"type": "invalid_request_error", "message": message}
    if code:
        error["code"] = code
    if param:
        error["param"] = param
    return JSONResponse({"error": error}, status_code=status)


def _b64(data: dict[str, Any]) -> str:
    return (
        base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode())
        .decode()
        .rstrip("=")
    )


def _unb64(token: str) -> dict[str, Any] | None:
    try:
        value = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


class Sandbox:
    def __init__(
        self,
        world: World,
        *,
        keys: Keys | None = None,
        faults: Faults | None = None,
        clock: Callable[[], datetime] | None = None,
        github_retention: timedelta = GITHUB_RETENTION,
        shopify_bucket: int = 40,
    ) -> None:
        self.world = world
        self.keys = keys or Keys()
        self.faults = faults or Faults()
        self.stats = Stats()
        self.clock = clock or (lambda: datetime.now(UTC))
        self.github_retention = github_retention
        self.shopify_bucket = (
            shopify_bucket  # Shopify's standard plan: 40 calls, leaking 2 per second
        )
        self._lock = threading.Lock()
        self._bucket: list[float] = []  # Shopify call times, for the call-limit header
        self._stripe_cache: tuple[int, list[dict[str, Any]], dict[str, int], list[int]] | None = (
            None
        )
        self.app = Starlette(
            routes=[
                Route("/v1/events", self.stripe_list, methods=["GET"]),
                Route("/v1/events/{id}", self.stripe_event, methods=["GET"]),
                Route("/v1/checkout/sessions/{id}", self.stripe_checkout_session, methods=["GET"]),
                Route("/v1/{objects}/{id}", self.stripe_object, methods=["GET"]),
                Route(
                    "/repos/{owner}/{repo}/hooks/{hook_id:int}/deliveries",
                    self.github_list,
                    methods=["GET"],
                ),
                Route(
                    "/orgs/{org}/hooks/{hook_id:int}/deliveries", self.github_list, methods=["GET"]
                ),
                Route("/app/hook/deliveries", self.github_list, methods=["GET"]),
                Route(
                    "/repos/{owner}/{repo}/hooks/{hook_id:int}/deliveries/{id:int}",
                    self.github_delivery,
                    methods=["GET"],
                ),
                Route(
                    "/orgs/{org}/hooks/{hook_id:int}/deliveries/{id:int}",
                    self.github_delivery,
                    methods=["GET"],
                ),
                Route("/app/hook/deliveries/{id:int}", self.github_delivery, methods=["GET"]),
                Route(
                    "/repos/{owner}/{repo}/hooks/{hook_id:int}/deliveries/{id:int}/attempts",
                    self.github_redeliver,
                    methods=["POST"],
                ),
                Route(
                    "/orgs/{org}/hooks/{hook_id:int}/deliveries/{id:int}/attempts",
                    self.github_redeliver,
                    methods=["POST"],
                ),
                Route(
                    "/app/hook/deliveries/{id:int}/attempts",
                    self.github_redeliver,
                    methods=["POST"],
                ),
                Route("/admin/api/{version}/orders.json", self.shopify_list, methods=["GET"]),
                Route("/admin/api/{version}/orders/{id}.json", self.shopify_order, methods=["GET"]),
                Route("/_sandbox/faults", self.set_faults, methods=["POST"]),
                Route("/_sandbox/stats", self.get_stats, methods=["GET"]),
                Route("/_sandbox/health", self.health, methods=["GET"]),
            ]
        )

    # -- faults and bookkeeping --------------------------------------------------------------------

    async def _fault(self, request: Request) -> Response | None:
        with self._lock:
            self.stats.calls += 1
            n = self.stats.calls
            route = request.url.path
            self.stats.by_route[route] = self.stats.by_route.get(route, 0) + 1
        f = self.faults
        if f.slow_ms:
            await asyncio.sleep(f.slow_ms / 1000)
        if f.malformed_call == n:
            return PlainTextResponse(
                "<html><body>502 Bad Gateway (proxy)</body></html>",
                status_code=200,
                media_type="text/html",
            )
        if f.rate_limit_every and n % f.rate_limit_every == 0:
            return JSONResponse(
                {
                    "error": {"type": "rate_limit_error", "message": "Too many requests"},
                    "message": "API rate limit exceeded",
                },
                status_code=429,
                headers={"Retry-After": f"{f.retry_after:g}"},
            )
        if (
            f.error_burst_start is not None
            and f.error_burst_start <= n < f.error_burst_start + f.error_burst_len
        ):
            return JSONResponse(
                {"error": {"type": "api_error", "message": "Service unavailable"}},
                status_code=f.error_status,
            )
        return None

    async def set_faults(self, request: Request) -> Response:
        data = await request.json()
        try:
            self.faults = Faults(**data)
        except TypeError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(asdict(self.faults))

    async def get_stats(self, request: Request) -> Response:
        return JSONResponse(asdict(self.stats))

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    # -- Stripe ------------------------------------------------------------------------------------

    def _stripe_auth(self, request: Request) -> Response | None:
        header = request.headers.get("authorization", "")
        key = None
        if header.lower().startswith("bearer "):
            key = header[7:].strip()
        elif header.lower().startswith("basic "):
            try:
                key = base64.b64decode(header[6:]).decode().split(":", 1)[0]
            except ValueError:
                key = None
        if key != self.keys.stripe:
            shown = f"{key[:8]}***" if key else "none"
            return _stripe_error(401, f"Invalid API Key provided: {shown}")
        return None

    def _stripe_index(self) -> tuple[list[dict[str, Any]], dict[str, int], list[int]]:
        """Events newest first, id -> position, and negated creation times (for bisect); rebuilt only
        when events are added, so a page costs O(page) even with a million events."""
        events = self.world.stripe_events
        if self._stripe_cache is None or self._stripe_cache[0] != len(events):
            newest_first = list(reversed(events))
            self._stripe_cache = (
                len(events),
                newest_first,
                {e["id"]: i for i, e in enumerate(newest_first)},
                [-e["created"] for e in newest_first],
            )
        _, newest_first, positions, neg_created = self._stripe_cache
        return newest_first, positions, neg_created

    def _stripe_listable(self) -> tuple[list[dict[str, Any]], int]:
        """Newest first, and how many of them are within the retention window (a bound, not a
        slice: copying a million-event list per page made every page O(N))."""
        newest_first, _, neg_created = self._stripe_index()
        oldest = int((self.clock() - STRIPE_RETENTION).timestamp())
        return newest_first, bisect.bisect_right(neg_created, -oldest)

    async def stripe_list(self, request: Request) -> Response:
        if (denied := self._stripe_auth(request)) or (denied := await self._fault(request)):
            return denied
        q = request.query_params
        try:
            limit = int(q.get("limit", "10"))
        except ValueError:
            return _stripe_error(400, "Invalid integer: limit", param="limit")
        if not 1 <= limit <= 100:
            return _stripe_error(400, "This value must be between 1 and 100.", param="limit")
        after, before = q.get("starting_after"), q.get("ending_before")
        if after and before:
            return _stripe_error(
                400, "You may only specify one of these parameters: ending_before, starting_after."
            )
        types = q.getlist("types[]")
        if types and q.get("type"):
            return _stripe_error(
                400, "You may pass either `type` or `types`, but not both.", param="types"
            )
        if len(types) > 20:
            return _stripe_error(400, "types may contain at most 20 values", param="types")
        bounds: dict[str, int] = {}
        for op in ("gt", "gte", "lt", "lte"):
            if (value := q.get(f"created[{op}]")) is not None:
                if not value.isdigit():
                    return _stripe_error(
                        400, f"Invalid integer: created[{op}]", param=f"created[{op}]"
                    )
                bounds[op] = int(value)
        if (exact := q.get("created")) is not None and exact.isdigit():
            bounds["gte"] = bounds["lte"] = int(exact)
        patterns = types or ([q["type"]] if q.get("type") else [])
        floor = max(bounds.get("gte", -(2**62)), bounds.get("gt", -(2**62) - 1) + 1)

        def keep(e: dict[str, Any]) -> bool:
            c = e["created"]
            if (
                c < floor
                or ("lt" in bounds and c >= bounds["lt"])
                or ("lte" in bounds and c > bounds["lte"])
            ):
                return False
            return not patterns or any(fnmatch.fnmatchcase(e["type"], p) for p in patterns)

        items, listable = self._stripe_listable()
        _, positions, _ = self._stripe_index()
        start, step = 0, 1
        if after or before:
            anchor = after or before
            position = positions.get(anchor or "")
            if position is None or position >= listable:
                param = "starting_after" if after else "ending_before"
                return _stripe_error(
                    400, f"No such event: '{anchor}'", code="resource_missing", param=param
                )
            start, step = (position + 1, 1) if after else (position - 1, -1)
        picked: list[dict[str, Any]] = []
        i = start
        while 0 <= i < listable and len(picked) <= limit:
            e = items[i]
            if step == 1 and e["created"] < floor:
                break  # newest first: everything further is older still
            if keep(e):
                picked.append(e)
            i += step
        has_more = len(picked) > limit
        page = picked[:limit]
        if step == -1:
            page.reverse()  # ending_before: the `limit` closest newer events, still newest first
        return JSONResponse(
            {"object": "list", "data": page, "has_more": has_more, "url": "/v1/events"}
        )

    async def stripe_event(self, request: Request) -> Response:
        if (denied := self._stripe_auth(request)) or (denied := await self._fault(request)):
            return denied
        event_id = request.path_params["id"]
        items, listable = self._stripe_listable()
        _, positions, _ = self._stripe_index()
        position = positions.get(event_id)
        event = items[position] if position is not None and position < listable else None
        if event is None:
            return _stripe_error(
                404, f"No such event: '{event_id}'", code="resource_missing", param="id"
            )
        return JSONResponse(event)

    async def stripe_object(self, request: Request) -> Response:
        if (denied := self._stripe_auth(request)) or (denied := await self._fault(request)):
            return denied
        kind = STRIPE_OBJECT_PATHS.get(request.path_params["objects"])
        obj = self.world.stripe_objects.get((kind or "", request.path_params["id"]))
        if obj is None:
            return _stripe_error(
                404,
                f"No such {kind or 'object'}: '{request.path_params['id']}'",
                code="resource_missing",
                param="id",
            )
        return JSONResponse(obj)

    async def stripe_checkout_session(self, request: Request) -> Response:
        if (denied := self._stripe_auth(request)) or (denied := await self._fault(request)):
            return denied
        obj = self.world.stripe_objects.get(("checkout.session", request.path_params["id"]))
        if obj is None:
            return _stripe_error(
                404,
                f"No such checkout.session: '{request.path_params['id']}'",
                code="resource_missing",
            )
        return JSONResponse(obj)

    # -- GitHub ------------------------------------------------------------------------------------

    def _github_auth(self, request: Request) -> Response | None:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if request.url.path.startswith("/app/"):
            if scheme.lower() != "bearer" or token.count(".") != 2:
                return JSONResponse(
                    {
                        "message": "A JSON web token could not be decoded",
                        "documentation_url": "https://docs.github.com/rest",
                    },
                    status_code=401,
                )
            try:
                if self.keys.github_app_public_key:
                    claims = jwt.decode(
                        token,
                        self.keys.github_app_public_key,
                        algorithms=["RS256"],
                        options={"verify_iat": False},
                    )
                else:
                    claims = jwt.decode(token, options={"verify_signature": False})
            except jwt.PyJWTError as exc:
                return JSONResponse(
                    {"message": f"A JSON web token could not be decoded ({exc})"}, status_code=401
                )
            if self.keys.github_app_id is not None and str(claims.get("iss")) != str(
                self.keys.github_app_id
            ):
                return JSONResponse({"message": "Integration not found"}, status_code=401)
            return None
        if scheme.lower() not in ("bearer", "token") or token != self.keys.github:
            return JSONResponse(
                {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"},
                status_code=401,
            )
        return None

    def _github_listable(self) -> list[GitHubAttempt]:
        oldest = self.clock() - self.github_retention
        return sorted(
            (a for a in self.world.github_attempts if a.delivered_at >= oldest),
            key=lambda a: a.id,
            reverse=True,
        )

    async def github_list(self, request: Request) -> Response:
        if (denied := self._github_auth(request)) or (denied := await self._fault(request)):
            return denied
        q = request.query_params
        try:
            per_page = min(100, max(1, int(q.get("per_page", "30"))))
        except ValueError:
            return JSONResponse({"message": "Invalid per_page"}, status_code=422)
        items = self._github_listable()
        if cursor := q.get("cursor"):
            decoded = _unb64(cursor)
            if decoded is None or not isinstance(decoded.get("below"), int):
                return JSONResponse({"message": "Invalid cursor"}, status_code=422)
            items = [a for a in items if a.id < decoded["below"]]
        page = items[:per_page]
        headers = {
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": "4999",
            "x-ratelimit-reset": str(int(time.time()) + 3600),
            "x-ratelimit-resource": "core",
        }
        if len(items) > per_page:
            nxt = request.url.replace_query_params(
                per_page=per_page, cursor=_b64({"below": page[-1].id})
            )
            headers["link"] = f'<{nxt}>; rel="next"'
        return JSONResponse([a.item() for a in page], headers=headers)

    def _attempt(self, attempt_id: int) -> GitHubAttempt | None:
        return next((a for a in self._github_listable() if a.id == attempt_id), None)

    async def github_delivery(self, request: Request) -> Response:
        if (denied := self._github_auth(request)) or (denied := await self._fault(request)):
            return denied
        attempt = self._attempt(request.path_params["id"])
        if attempt is None:
            return JSONResponse({"message": "Not Found"}, status_code=404)
        detail = attempt.item()
        detail["url"] = "https://sandbox.invalid/webhook"
        detail["request"] = {
            "headers": {
                "X-GitHub-Delivery": attempt.guid,
                "X-GitHub-Event": attempt.event,
                "Content-Type": "application/json",
            },
            "payload": attempt.payload,
        }
        detail["response"] = {"headers": {}, "payload": None}
        return JSONResponse(detail)

    async def github_redeliver(self, request: Request) -> Response:
        if (denied := self._github_auth(request)) or (denied := await self._fault(request)):
            return denied
        attempt = self._attempt(request.path_params["id"])
        if attempt is None:
            return JSONResponse({"message": "Not Found"}, status_code=404)
        with self._lock:
            new_id = max(a.id for a in self.world.github_attempts) + 1
            self.world.github_attempts.append(
                GitHubAttempt(
                    new_id,
                    attempt.guid,
                    self.clock(),
                    "OK",
                    200,
                    attempt.event,
                    attempt.action,
                    True,
                    attempt.payload,
                )
            )
        return JSONResponse({}, status_code=202)

    # -- Shopify -----------------------------------------------------------------------------------

    def _shopify_auth(self, request: Request) -> Response | None:
        if request.headers.get("x-shopify-access-token") != self.keys.shopify:
            return JSONResponse(
                {
                    "errors": "[API] Invalid API key or access token (unrecognized login or wrong password)"
                },
                status_code=401,
            )
        return None

    def _call_limit(self) -> str:
        now = time.monotonic()
        with self._lock:
            window = self.shopify_bucket / 2  # seconds for a full bucket to leak at 2 calls/s
            self._bucket = [t for t in self._bucket if now - t < window] + [now]
            return f"{min(self.shopify_bucket, len(self._bucket))}/{self.shopify_bucket}"

    async def shopify_list(self, request: Request) -> Response:
        if (denied := self._shopify_auth(request)) or (denied := await self._fault(request)):
            return denied
        q = request.query_params
        try:
            limit = int(q.get("limit", "50"))
        except ValueError:
            return JSONResponse({"errors": {"limit": "must be an integer"}}, status_code=400)
        if not 1 <= limit <= 250:
            return JSONResponse({"errors": {"limit": "must be between 1 and 250"}}, status_code=400)
        if page_info := q.get("page_info"):
            if set(q.keys()) - {"page_info", "limit", "fields"}:
                return JSONResponse({"errors": "page_info - Invalid value."}, status_code=400)
            state = _unb64(page_info)
            if state is None:
                return JSONResponse({"errors": "page_info - Invalid value."}, status_code=400)
            updated_min, after = state.get("u"), tuple(state.get("after", ()))
        else:
            updated_min, after = q.get("updated_at_min"), ()
        orders = sorted(
            self.world.shopify_orders.values(), key=lambda o: (o["updated_at"], o["id"])
        )
        if updated_min:
            try:
                floor = datetime.fromisoformat(updated_min.replace("Z", "+00:00"))
            except ValueError:
                return JSONResponse({"errors": {"updated_at_min": "is invalid"}}, status_code=400)
            orders = [o for o in orders if datetime.fromisoformat(o["updated_at"]) >= floor]
        if after:
            orders = [o for o in orders if (o["updated_at"], o["id"]) > (after[0], after[1])]
        page = orders[:limit]
        headers = {"x-shopify-shop-api-call-limit": self._call_limit()}
        if len(orders) > limit:
            token = _b64({"u": updated_min, "after": [page[-1]["updated_at"], page[-1]["id"]]})
            nxt = request.url.replace_query_params(limit=limit, page_info=token)
            headers["link"] = f'<{nxt}>; rel="next"'
        body = json.dumps({"orders": page})  # ids stay exact integers (> 2**53)
        return Response(body, media_type="application/json", headers=headers)

    async def shopify_order(self, request: Request) -> Response:
        if (denied := self._shopify_auth(request)) or (denied := await self._fault(request)):
            return denied
        order = self.world.shopify_orders.get(request.path_params["id"])
        if order is None:
            return JSONResponse({"errors": "Not Found"}, status_code=404)
        return Response(
            json.dumps({"order": order}),
            media_type="application/json",
            headers={"x-shopify-shop-api-call-limit": self._call_limit()},
        )
