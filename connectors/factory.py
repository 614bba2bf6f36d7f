"""Build the connector of a configured source: one HTTP client per run, auth per provider."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from datetime import timedelta

import httpx

from connectors import github, shopify, stripe
from connectors.base import Connector
from connectors.generic import GenericConnector
from connectors.http import ProviderClient, RetryPolicy
from reconciler.config import SourceSettings
from reconciler.errors import ConfigError


def build_connector(
    source: SourceSettings,
    *,
    environ: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    timeout: float = 30.0,
) -> Connector:
    def client(base_url: str, headers: dict[str, str], hint: str) -> ProviderClient:
        return ProviderClient(
            source.name,
            base_url,
            headers=headers,
            auth_hint=hint,
            transport=transport,
            policy=policy,
            sleep=sleep,
            rng=rng,
            timeout=timeout,
        )

    hint = f"the key in ${source.api_key_env}" if source.api_key_env else "the credentials"
    if source.kind == "stripe":
        headers = {"Authorization": f"Bearer {source.api_key(environ)}"}
        if source.account:
            headers["Stripe-Account"] = source.account
        return stripe.StripeConnector(
            source.name,
            client(source.base_url or stripe.DEFAULT_BASE_URL, headers, hint),
            event_types=source.event_types,
            page_size=source.page_size or stripe.PAGE_SIZE,
        )
    if source.kind == "github":
        base = source.base_url or github.DEFAULT_BASE_URL
        if source.app_id is not None:
            app = (source.app_id, source.private_key(environ))
            headers = dict(github.HEADERS)
            hint = f"the app id and the private key in ${source.private_key_env}"
        elif source.repository or source.organization:
            app = None
            headers = {**github.HEADERS, "Authorization": f"Bearer {source.api_key(environ)}"}
        else:
            raise ConfigError(
                f"source '{source.name}': a GitHub connector needs 'repository' or 'organization' with 'hook_id', or 'app_id'"
            )
        retention = github.default_retention(base)
        if source.retention_days:
            retention = timedelta(days=source.retention_days)
        return github.GitHubConnector(
            source.name,
            client(base, headers, hint),
            deliveries_path=github.deliveries_path(
                source.repository, source.organization, source.hook_id
            ),
            retention=retention,
            app=app,
            page_size=source.page_size or github.PAGE_SIZE,
        )
    if source.kind == "shopify":
        if not source.base_url:
            raise ConfigError(
                f"source '{source.name}': a Shopify connector needs 'base_url' (https://{{shop}}.myshopify.com)"
            )
        return shopify.ShopifyConnector(
            source.name,
            client(source.base_url, {"X-Shopify-Access-Token": source.api_key(environ)}, hint),
            api_version=source.api_version,
            resources=source.resources,
            page_size=source.page_size or shopify.PAGE_SIZE,
        )
    if not source.base_url:
        raise ConfigError(f"source '{source.name}': a {source.kind} connector needs 'base_url'")
    headers = {"Authorization": f"Bearer {source.api_key(environ)}"} if source.api_key_env else {}
    return GenericConnector(source, client(source.base_url, headers, hint))
