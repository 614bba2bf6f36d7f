"""A configured source as its provider sees it: ``connectors.options.SourceOptions`` with the secrets
resolved from the environment, and the connector built from it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from connectors.base import Connector
from connectors.budget import BudgetSettings
from connectors.http import RetryPolicy
from connectors.options import SourceOptions
from connectors.registry import build_connector as build_from_options
from connectors.registry import provider
from reconciler.config import Settings, SourceSettings

_COMMON = (
    "name",
    "kind",
    "base_url",
    "api_key_env",
    "tolerance_seconds",
    "retention_days",
    "page_size",
)

__all__ = ["budget_of", "build_connector", "options_of", "provider", "run_connector_factory"]


def budget_of(source: SourceSettings) -> BudgetSettings:
    """The source's request budget: its configured keys over its provider's defaults."""
    default = provider(source.kind).budget
    rate = source.max_requests_per_second
    return BudgetSettings(
        rate=default.rate if rate is None else (rate or None),
        concurrency=source.max_concurrency or default.concurrency,
        burst=default.burst if rate is None else None,
    )


def options_of(
    source: SourceSettings, environ: Mapping[str, str] | None = None, *, secrets: bool = True
) -> SourceOptions:
    """The source's options; with ``secrets``, its API and private keys read from the environment
    (a variable that is named but not set is a ConfigError naming it)."""
    values: dict[str, Any] = {name: getattr(source, name) for name in _COMMON}
    if source.tolerance_seconds is None:  # the provider's documented window
        values["tolerance_seconds"] = provider(source.kind).tolerance
    values["budget"] = budget_of(source)
    if secrets and source.api_key_env:
        values["api_key"] = source.api_key(environ)
    if secrets and source.key("private_key_env"):
        values["private_key"] = source.private_key(environ)
    if secrets:
        values["credentials"] = {
            key.removesuffix("_env"): source.credential(key, environ)
            for key in source.credential_keys()
            if key not in ("api_key_env", "private_key_env")
        }
    return SourceOptions(keys=source.keys, **values)


def build_connector(
    source: SourceSettings, *, environ: Mapping[str, str] | None = None, **client: Any
) -> Connector:
    """The connector of a configured source (``client``: the HTTP client's transport, retry
    policy, sleep, rng and timeout, for tests)."""
    return build_from_options(options_of(source, environ), **client)


def run_connector_factory(settings: Settings) -> Callable[[SourceSettings], Connector]:
    """How a run builds a source's connector: each request retried within ``[reconcile]
    max_wait_seconds``."""
    policy = RetryPolicy(max_total_wait=settings.reconcile.max_wait_seconds)
    return functools.partial(build_connector, policy=policy)
