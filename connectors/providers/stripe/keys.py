"""A ``stripe`` source's own keys (``config.toml``): which events, which account, which payloads."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from connectors.options import ProviderKeys


class StripeKeys(ProviderKeys):
    event_types: tuple[str, ...] = Field(default=(), max_length=20)  # types[] takes at most 20
    account: str | None = None  # a Connect account: https://docs.stripe.com/connect/authentication
    # what the source's event destination sends: v1 events with their object ("snapshot"), or v2
    # thin events naming it ("thin", listed at /v2/core/events: connectors.providers.stripe.thin)
    payload_style: Literal["snapshot", "thin"] = "snapshot"
