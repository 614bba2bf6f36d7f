"""Every provider hookledger knows, found through the ``hookledger.providers`` entry points: the
built-in ones are declared in pyproject.toml, and a provider published as its own package declares
its own (docs/connectors.md: "Adding a provider"). A kind's module is imported only when a source of
that kind, or a command, asks for it: a reconcile of one Stripe source imports no other provider."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from connectors.base import Connector
from connectors.budget import RequestBudget
from connectors.errors import ConfigError
from connectors.http import ProviderClient, RetryPolicy
from connectors.options import SourceOptions
from connectors.provider import Provider

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    import httpx

GROUP = "hookledger.providers"

# the providers imported so far, by kind (a test may register one here directly)
LOADED: dict[str, Provider] = {}


@functools.cache
def _entry_points() -> dict[str, EntryPoint]:
    from importlib.metadata import entry_points

    found: dict[str, EntryPoint] = {}
    for point in entry_points(group=GROUP):
        found.setdefault(point.name, point)  # the first installed wins, as importlib lists them
    return found


def kinds() -> tuple[str, ...]:
    """Every registered kind (nothing is imported)."""
    return tuple(dict.fromkeys([*_entry_points(), *LOADED]))


def provider(kind: str) -> Provider:
    """The provider of ``kind``, its package imported on first use."""
    if kind in LOADED:
        return LOADED[kind]
    point = _entry_points().get(kind)
    if point is None:
        raise ConfigError(
            f"unknown source kind '{kind}' (one of {', '.join(repr(k) for k in kinds())})"
        )
    # a third-party package that cannot be imported is named, not a traceback
    try:
        value = point.load()
    except Exception as exc:
        raise ConfigError(
            f"source kind '{kind}': its provider {point.value} cannot be loaded "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(value, Provider) or value.kind != kind:
        raise ConfigError(
            f"source kind '{kind}': entry point {point.value} is not a Provider of kind '{kind}'"
        )
    LOADED[kind] = value
    return value


def every_provider() -> tuple[Provider, ...]:
    """Every registered provider, each imported (the docs, the completeness tests)."""
    return tuple(provider(kind) for kind in kinds())


def kinds_taking(key: str) -> tuple[str, ...]:
    """The kinds whose configuration takes this key (imports every provider: for error messages
    and the docs, never on a command's way)."""
    return tuple(p.kind for p in every_provider() if key in p.keys.model_fields)


def build_connector(
    options: SourceOptions,
    *,
    transport: httpx.BaseTransport | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    timeout: float = 30.0,
) -> Connector:
    """The connector of a source: one HTTP client per run, auth per provider."""
    own = provider(options.kind)
    build = own.build
    if build is None:
        raise ConfigError(f"source '{options.name}': kind '{options.kind}' has no list API")

    # one budget for every request of the source this connector makes: its slices, its look-ups
    # (its waits are real: a provider's Retry-After is honoured whatever sleep the retries use)
    budget = RequestBudget(options.budget or own.budget)

    def client(base_url: str, headers: dict[str, str], hint: str) -> ProviderClient:
        return ProviderClient(
            options.name,
            base_url,
            headers=headers,
            auth_hint=hint,
            transport=transport,
            policy=policy,
            sleep=sleep,
            rng=rng,
            timeout=timeout,
            budget=budget,
        )

    return build(options, client)
