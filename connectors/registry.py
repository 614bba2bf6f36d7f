"""Every provider hookledger knows, registered once. Adding one is a module with its connector and a
``PROVIDER`` value (``connectors.provider.Provider``), plus its line here (docs/connectors.md: "Adding a
provider")."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from connectors import (
    adyen,
    discord,
    discord_interactions,
    generic,
    github,
    gopay,
    shopify,
    slack,
    stripe,
    twilio,
    twilio_api,
)
from connectors.base import Connector
from connectors.budget import RequestBudget
from connectors.errors import ConfigError
from connectors.http import ProviderClient, RetryPolicy
from connectors.options import SourceOptions
from connectors.provider import Provider

if TYPE_CHECKING:
    import httpx

PROVIDERS: dict[str, Provider] = {
    p.kind: p
    for p in (
        stripe.PROVIDER,
        github.PROVIDER,
        shopify.PROVIDER,
        generic.STANDARD,
        generic.GENERIC,
        slack.PROVIDER,
        twilio.PROVIDER,
        adyen.PROVIDER,
        discord.PROVIDER,
        discord_interactions.PROVIDER,
        gopay.PROVIDER,
    )
}


class AllProviderKeys(
    stripe.StripeKeys,
    github.GitHubKeys,
    shopify.ShopifyKeys,
    generic.GenericSenderKeys,
    discord_interactions.DiscordInteractionsKeys,  # before DiscordKeys: its subclass
    discord.DiscordKeys,
    twilio_api.TwilioKeys,
    gopay.GoPayKeys,
):
    """Every provider's own keys, for the configuration's ``[[sources]]`` table (a new provider's
    keys class joins here, next to its entry above)."""


def kinds() -> tuple[str, ...]:
    return tuple(PROVIDERS)


def provider(kind: str) -> Provider:
    try:
        return PROVIDERS[kind]
    except KeyError:
        raise ConfigError(
            f"unknown source kind '{kind}' (one of {', '.join(repr(k) for k in PROVIDERS)})"
        ) from None


def kinds_taking(key: str) -> tuple[str, ...]:
    """The kinds whose configuration takes this key (empty: every kind takes it)."""
    return tuple(kind for kind, p in PROVIDERS.items() if key in p.keys.model_fields)


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
