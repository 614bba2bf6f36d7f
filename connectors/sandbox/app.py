"""The sandbox provider's HTTP API (Starlette).

Implements what the connectors use, with the providers' own shapes and paging:

- Stripe: ``GET /v1/events`` (``limit`` 1-100, ``starting_after`` / ``ending_before``, ``created[gte|gt|lte|lt]``,
  ``type`` with ``*`` wildcards, ``types[]``; newest first; 30-day retention), ``GET /v1/events/{id}``,
  ``GET /v1/{objects}/{id}`` and ``/v1/checkout/sessions/{id}``. Auth: ``Authorization: Bearer <key>``.
  Its v2 thin events: ``GET /v2/core/events`` and ``/v2/core/events/{id}``. Routes:
  ``connectors.providers.stripe.sandbox`` and ``sandbox_v2``.
- GitHub: ``GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries``, the ``/orgs/...`` and ``/app/hook``
  variants (``per_page`` ≤ 100, opaque ``cursor`` in the ``Link`` header, newest first, 3-day retention),
  ``GET .../deliveries/{id}`` and ``POST .../deliveries/{id}/attempts``. Auth: a token, or an app JWT
  (RS256, ``iss`` = app id) for ``/app`` (``connectors.providers.github.sandbox``).
- Shopify: ``GET /admin/api/{version}/orders.json`` (``updated_at_min``, ``limit`` ≤ 250, ``page_info``
  in the ``Link`` header, which can't be combined with other filters) and ``orders/{id}.json``;
  ``X-Shopify-Access-Token``; ``X-Shopify-Shop-Api-Call-Limit`` on every answer; its GraphQL Admin API
  (``connectors.providers.shopify.sandbox`` and ``sandbox_graphql``).
- Twilio: ``GET /2010-04-01/Accounts/{sid}.json``, its ``Messages.json`` and ``Calls.json``
  (``DateSent>``/``StartTime>``, ``PageSize`` ≤ 1000, ``next_page_uri``) and one of each by SID;
  HTTP Basic auth (``connectors.providers.twilio.sandbox``).
- GoPay: ``POST /api/oauth2/token`` and ``GET /api/payments/payment/{id}`` with its bearer token
  (``connectors.providers.gopay.sandbox``).

Fault switches (constructor or ``POST /_sandbox/faults``): 429 with ``Retry-After`` every Nth call, a burst
of 5xx, slow pages, a malformed page; a provider's latency (``latency_ms`` give or take ``jitter``) and
rate limit (``rate_limit`` calls a second, beyond it each provider's own 429). ``GET /_sandbox/stats``
counts calls and the 429s the rate limit sent (``throttled``).
"""

from __future__ import annotations

import asyncio
import math
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route

from connectors.providers.github.sandbox import GITHUB_RETENTION, GitHubApi
from connectors.providers.gopay.sandbox import GoPayApi
from connectors.providers.shopify.sandbox_graphql import POINTS, RESTORE_RATE, ShopifyGraphQLApi
from connectors.providers.stripe.sandbox_v2 import StripeV2Api
from connectors.providers.twilio.sandbox import TwilioApi
from connectors.sandbox.common import CallWindow, Faults, Keys, Stats
from connectors.sandbox.standin import Refused, StandIn, stand_in_class, stand_in_kinds
from connectors.sandbox.world import World

__all__ = ["Faults", "Keys", "Refused", "Sandbox", "Stats"]


def throttled(route: str, wait: float) -> Response:
    """A call over the rate limit, refused as its provider refuses one (docs/providers.md §1B,
    §2B, §3B): Stripe a 429 with ``Stripe-Should-Retry``; GitHub's secondary limit a 429 with
    ``retry-after`` in whole seconds; Shopify a 429 with ``Retry-After`` and its call-limit header."""
    if route.startswith(("/v1/", "/v2/")):
        return JSONResponse(
            {"error": {"type": "rate_limit_error", "message": "Request rate limit exceeded."}},
            status_code=429,
            headers={"Stripe-Should-Retry": "true"},
        )
    if route.startswith("/admin/"):
        return JSONResponse(
            {"errors": "Exceeded 2 calls per second for api client. Reduce request rates."},
            status_code=429,
            headers={"Retry-After": f"{max(wait, 0.05):.2f}"},
        )
    if route.startswith("/2010-04-01/"):
        return JSONResponse(
            {
                "code": 20429,
                "message": "Too Many Requests",
                "more_info": "https://www.twilio.com/docs/errors/20429",
                "status": 429,
            },
            status_code=429,
        )
    return JSONResponse(
        {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."},
        status_code=429,
        headers={"retry-after": str(max(1, math.ceil(wait)))},
    )


class Sandbox(StripeV2Api, GitHubApi, ShopifyGraphQLApi, TwilioApi, GoPayApi):
    def __init__(
        self,
        world: World,
        *,
        keys: Keys | None = None,
        faults: Faults | None = None,
        clock: Callable[[], datetime] | None = None,
        github_retention: timedelta = GITHUB_RETENTION,
        shopify_bucket: int = 40,
        shopify_points: tuple[float, float] = (POINTS, RESTORE_RATE),
        stand_ins: Iterable[str] | None = None,
    ) -> None:
        """``stand_ins``: the kinds whose list APIs it stands in for (default: every one)."""
        self.world = world
        self.keys = keys or Keys()
        self.faults = faults or Faults()
        self.stats = Stats()
        self.clock = clock or (lambda: datetime.now(UTC))
        self.github_retention = github_retention
        self.shopify_bucket = (
            shopify_bucket  # Shopify's standard plan: 40 calls, leaking 2 per second
        )
        self.shopify_points = shopify_points  # GraphQL's cost bucket: maximum, restored a second
        self._lock = threading.Lock()
        self._calls: CallWindow | None = None
        self._bucket: list[float] = []  # Shopify call times, for the call-limit header
        self._gopay_tokens: dict[str, str] = {}
        self._stripe_cache: tuple[int, list[dict[str, Any]], dict[str, int], list[int]] | None = (
            None
        )
        # the providers reconciled by their event lists, each under /<kind>/
        self.stand_ins: dict[str, StandIn] = {
            kind: stand_in_class(kind)(self)
            for kind in (stand_in_kinds() if stand_ins is None else stand_ins)
        }
        self.app = Starlette(
            routes=[
                Route("/v1/events", self.stripe_list, methods=["GET"]),
                Route("/v2/core/events", self.stripe_v2_list, methods=["GET"]),
                Route("/v2/core/events/{id}", self.stripe_v2_event, methods=["GET"]),
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
                Route(
                    "/admin/oauth/access_scopes.json", self.shopify_access_scopes, methods=["GET"]
                ),
                Route("/admin/api/{version}/orders.json", self.shopify_list, methods=["GET"]),
                Route("/admin/api/{version}/orders/{id}.json", self.shopify_order, methods=["GET"]),
                Route("/admin/api/{version}/graphql.json", self.shopify_graphql, methods=["POST"]),
                Route("/2010-04-01/Accounts/{account}.json", self.twilio_account, methods=["GET"]),
                Route(
                    "/2010-04-01/Accounts/{account}/{resource}.json",
                    self.twilio_list,
                    methods=["GET"],
                ),
                Route(
                    "/2010-04-01/Accounts/{account}/{resource}/{sid}.json",
                    self.twilio_resource,
                    methods=["GET"],
                ),
                Route("/api/oauth2/token", self.gopay_token, methods=["POST"]),
                Route("/api/payments/payment/{id}", self.gopay_payment, methods=["GET"]),
                *(Mount(f"/{kind}", routes=s.routes()) for kind, s in self.stand_ins.items()),
                Route("/_sandbox/faults", self.set_faults, methods=["POST"]),
                Route("/_sandbox/stats", self.get_stats, methods=["GET"]),
                Route("/_sandbox/health", self.health, methods=["GET"]),
            ]
        )

    async def _fault(self, request: Request) -> Response | None:
        f = self.faults
        with self._lock:
            self.stats.calls += 1
            n = self.stats.calls
            route = request.url.path
            self.stats.by_route[route] = self.stats.by_route.get(route, 0) + 1
            wait = self._admit(f.rate_limit)
            if wait:
                self.stats.throttled += 1
        if f.latency_ms:
            spread = f.latency_ms * f.jitter
            await asyncio.sleep(
                max(0.0, random.uniform(f.latency_ms - spread, f.latency_ms + spread)) / 1000
            )
        if wait:
            kind = route.split("/")[1]
            if kind in self.stand_ins:
                return self.stand_ins[kind].throttled(wait)
            return throttled(route, wait)
        if f.slow_ms:
            await asyncio.sleep(f.slow_ms / 1000)
        if (
            f.malformed_call is not None
            and f.malformed_call <= n < f.malformed_call + f.malformed_len
        ):
            if f.malformed_body == "cut":
                return Response(
                    b'{"object": "list", "data": [{"id": "evt_', 200, media_type="application/json"
                )
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
                headers={"Retry-After": f"{f.retry_after:g}"} if f.error_status == 429 else None,
            )
        return None

    def _admit(self, rate: float | None) -> float:
        """The rate limit's verdict on a call arriving now (locked)."""
        if not rate:
            self._calls = None
            return 0.0
        now = time.monotonic()
        if self._calls is None or self._calls.rate != rate:
            self._calls = CallWindow(rate)
        return self._calls.admit(now)

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
