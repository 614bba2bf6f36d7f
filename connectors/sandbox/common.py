"""What the sandbox provider's APIs share: its keys, fault switches, call counts, and the state every
provider's routes read (``SandboxState``)."""

from __future__ import annotations

import base64
import collections
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from connectors.sandbox.world import TWILIO_ACCOUNT, World


@dataclass
class Keys:
    stripe: str = "sk_test_sandbox"
    github: str = "ghp_sandbox"
    shopify: str = "shpat_sandbox"
    github_app_id: int | None = None
    github_app_public_key: str | None = None  # PEM; JWTs are verified with it when set
    # what the keys may do, as each provider tells it: a classic GitHub token's X-OAuth-Scopes,
    # the Shopify token's access scopes (GET /admin/oauth/access_scopes.json)
    github_scopes: str = "admin:repo_hook"
    shopify_scopes: tuple[str, ...] = ("read_orders",)
    # Twilio: the account SID and its auth token, and API keys (SID -> secret) that may read it
    twilio_account: str = TWILIO_ACCOUNT
    twilio_token: str = "sandbox-twilio-auth-token"
    twilio_api_keys: dict[str, str] = field(default_factory=dict)
    # GoPay: the OAuth client (ClientID, ClientSecret)
    gopay_client: tuple[str, str] = ("1234567890", "sandbox-gopay-secret")


@dataclass
class Faults:
    rate_limit_every: int | None = None  # every Nth API call answers 429
    retry_after: float = 1.0
    error_burst_start: int | None = None  # calls [start, start + len) answer error_status
    error_burst_len: int = 0
    error_status: int = 503
    slow_ms: int = 0
    malformed_call: int | None = None  # that API call answers a page that is not JSON ...
    malformed_len: int = 1  # ... and the calls after it, this many in all
    malformed_body: str = "html"  # a proxy's HTML error page, or "cut": JSON cut off mid-body
    latency_ms: float = 0.0  # every API call answers after this long (a real provider's ~300 ms)
    jitter: float = 0.2  # ... give or take this fraction of it
    rate_limit: float | None = None  # API calls a second; beyond, 429 with the provider's signals


@dataclass
class Stats:
    calls: int = 0
    by_route: dict[str, int] = field(default_factory=dict)
    throttled: int = 0  # calls refused by ``rate_limit`` (429)


class CallWindow:
    """The sandbox's own rate limit: at most ``rate`` calls in any sliding second, counted on
    arrival (Stripe's sandbox allows 25 requests a second: https://docs.stripe.com/rate-limits).
    So a client that saves up a second's worth of calls and then keeps its pace is refused."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.admitted: collections.deque[float] = collections.deque()

    def admit(self, now: float) -> float:
        """0 when the call may go, else the seconds until the oldest call in the window leaves."""
        while self.admitted and self.admitted[0] <= now - 1.0:
            self.admitted.popleft()
        if len(self.admitted) < max(1, int(self.rate)):
            self.admitted.append(now)
            return 0.0
        return max(1e-3, self.admitted[0] + 1.0 - now)


def b64(data: dict[str, Any]) -> str:
    return (
        base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode())
        .decode()
        .rstrip("=")
    )


def unb64(token: str) -> dict[str, Any] | None:
    try:
        value = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


class SandboxState:
    """The attributes the provider APIs read (set by ``app.Sandbox``)."""

    world: World
    keys: Keys
    faults: Faults
    stats: Stats
    clock: Callable[[], datetime]
    github_retention: timedelta
    shopify_bucket: int
    _lock: threading.Lock
    _bucket: list[float]
    _stripe_cache: tuple[int, list[dict[str, Any]], dict[str, int], list[int]] | None
    # the fault switches every route consults first (``app.Sandbox._fault``)
    _fault: Callable[[Request], Awaitable[Response | None]]
