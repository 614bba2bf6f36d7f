"""What the sandbox provider's APIs share: its keys, fault switches, call counts, and the state every
provider's routes read (``SandboxState``)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from connectors.sandbox.world import World


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


@dataclass
class Faults:
    rate_limit_every: int | None = None  # every Nth API call answers 429
    retry_after: float = 1.0
    error_burst_start: int | None = None  # calls [start, start + len) answer error_status
    error_burst_len: int = 0
    error_status: int = 503
    slow_ms: int = 0
    malformed_call: int | None = None  # that API call answers a page that is not JSON
    latency_ms: float = 0.0  # every API call answers after this long (a real provider's ~300 ms)
    jitter: float = 0.2  # ... give or take this fraction of it
    rate_limit: float | None = None  # API calls a second; beyond, 429 with the provider's signals


@dataclass
class Stats:
    calls: int = 0
    by_route: dict[str, int] = field(default_factory=dict)
    throttled: int = 0  # calls refused by ``rate_limit`` (429)


class CallBucket:
    """The sandbox's own rate limit: a token bucket of ``rate`` a second holding one second's
    worth, as providers allow short bursts (Stripe's limiter is a token bucket)."""

    def __init__(self, rate: float, now: float) -> None:
        self.rate, self.tokens, self.at = rate, rate, now

    def admit(self, now: float) -> float:
        """0 when the call may go, else the seconds until a token is back."""
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


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
