"""The demo's providers reconciled by their event lists (``connectors.sandbox.standin``): their
workspace sources and credentials, and their day's deliveries, each signed as it is sent (Paddle's
signed time has a 5-second window). The day drops and repeats some of them like every other
source's: each dropped one is ``missing`` in the ground truth, each repeated one stored once."""

from __future__ import annotations

import time
from typing import Any

from connectors.registry import provider
from connectors.sandbox.sender import Webhook
from connectors.sandbox.standin import Sent, stand_in_class
from connectors.sandbox.world import World
from reconciler.config import Settings
from reconciler.sources import options_of

LISTED = ("paddle", "gocardless")


def _variable(kind: str, key: str) -> str:
    return f"HOOKLEDGER_DEMO_{kind.upper()}_{key.removesuffix('_env').upper()}"


def listed_env() -> dict[str, str]:
    """Each listed kind's signing secret and the credentials its stand-in accepts."""
    env = {}
    for kind in LISTED:
        env[_variable(kind, "secret")] = f"demo-{kind}-webhook-secret"
        for key, value in stand_in_class(kind).credentials.items():
            env[_variable(kind, key)] = value
    return env


def listed_config(sandbox: str) -> str:
    """Their ``[[sources]]`` tables, reading their stand-ins in the sandbox at ``sandbox``."""
    tables = []
    for kind in LISTED:
        stand_in = stand_in_class(kind)
        lines = [
            "",
            f"# received and reconciled from {kind}'s event list: a dropped delivery is missing",
            "[[sources]]",
            f'name = "{kind}"',
            f'kind = "{kind}"',
            f'base_url = "{sandbox}/{kind}"',
            f'signing_secret_env = "{_variable(kind, "secret")}"',
            *(f'{key} = "{_variable(kind, key)}"' for key in stand_in.credentials),
            *(f"{key} = {_toml(value)}" for key, value in stand_in.source_keys.items()),
            "initial_lookback_hours = 48",
        ]
        tables.append("\n".join(lines))
    return "\n".join(tables) + "\n"


def _toml(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value).lower()


def listed_webhooks(world: World, settings: Settings, base: str) -> dict[str, list[Webhook]]:
    """Each listed kind's history as its deliveries, signed with its source's secret when sent."""
    return {
        kind: [_webhook(settings, kind, event, base) for event in world.listed[kind]]
        for kind in LISTED
    }


def _webhook(settings: Settings, kind: str, event: Sent, base: str) -> Webhook:
    source = settings.source(kind)
    assert source is not None, f"the demo's workspace has no '{kind}' source"
    own = provider(kind)
    assert own.sign is not None
    sign, options, secret = own.sign, options_of(source, secrets=False), source.signing_secrets()[0]
    url = f"{base}/webhooks/{kind}"

    def signed() -> dict[str, str]:
        return sign(options, event.headers, event.body, secret, time.time(), url)

    return Webhook(event.event_id, dict(event.headers), event.body, sign=signed)
