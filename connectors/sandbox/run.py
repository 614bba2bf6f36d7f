"""``hookledger sandbox``: serve the sandbox provider and, optionally, deliver its events as webhooks."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from connectors.sandbox.app import Faults, Sandbox
from connectors.sandbox.sender import (
    DeliveryFaults,
    github_webhooks,
    plan,
    record_github_outcomes,
    send,
    shopify_webhooks,
    stripe_webhooks,
)
from connectors.sandbox.standin import stand_in_class, stand_in_kinds
from connectors.sandbox.world import World, build_world

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    """A receiver's source the sandbox delivers to: its name, its provider's kind, a signing secret."""

    name: str
    kind: str
    secret: str


@dataclass(frozen=True)
class SendPlan:
    faults: DeliveryFaults
    seed: int
    report_path: Path
    receiver_url: str = "http://127.0.0.1:8000"
    targets: tuple[Target, ...] = ()


# the kinds whose webhooks the sandbox can send
SENDS = ("stripe", "github", "shopify")
LISTED_EVENTS = 100  # each stand-in's history: events over the last day


def deliver_all(world: World, send_plan: SendPlan, client: httpx.Client) -> dict[str, Any]:
    """Send each target's events to the receiver (the kinds in ``SENDS``); return the report."""
    base = send_plan.receiver_url
    reports: dict[str, Any] = {}
    for source in send_plan.targets:
        if source.kind not in SENDS:
            continue
        secret = source.secret
        if source.kind == "stripe":
            hooks = stripe_webhooks(world.stripe_events, secret)
        elif source.kind == "github":
            hooks = github_webhooks(world.github_attempts, secret)
        else:
            hooks = shopify_webhooks(world, secret, seed=send_plan.seed)
        ordered, report = plan(hooks, send_plan.faults, seed=send_plan.seed)
        send(client, f"{base}/webhooks/{source.name}", ordered, report)
        if source.kind == "github":
            record_github_outcomes(world, report)
        reports[source.name] = report.to_json()
        log.info("sent %d webhooks to %s: %s", len(ordered), source.name, dict(report.responses))
    send_plan.report_path.parent.mkdir(parents=True, exist_ok=True)
    send_plan.report_path.write_text(json.dumps(reports, indent=2))
    return reports


def serve(
    *,
    host: str,
    port: int,
    seed: int,
    send_plan: SendPlan | None,
    log_level: str = "info",
    latency_ms: float = 0.0,
    rate_limit: float | None = None,
) -> None:
    import uvicorn

    listed = stand_in_kinds()
    world = build_world(seed, listed=dict.fromkeys(listed, LISTED_EVENTS))
    box = Sandbox(world, faults=Faults(latency_ms=latency_ms, rate_limit=rate_limit))
    if send_plan is not None:

        def _send() -> None:
            with httpx.Client(timeout=30) as client:
                reports = deliver_all(world, send_plan, client)
            summary = {
                name: {k: len(v) if isinstance(v, list) else v for k, v in r.items()}
                for name, r in reports.items()
            }
            print(json.dumps(summary, indent=2), flush=True)

        threading.Thread(target=_send, daemon=True).start()
    print(
        f"sandbox provider on http://{host}:{port} (seed {seed}); API keys: sk_test_sandbox, ghp_sandbox, shpat_sandbox",
        flush=True,
    )
    for kind in listed:  # each list API under /<kind>/, with the credentials its stand-in takes
        credentials = stand_in_class(kind).credentials.items()
        keys = ", ".join(f"{k.removesuffix('_env')} {v}" for k, v in credentials)
        print(f"  {kind}: base_url http://{host}:{port}/{kind} ({keys})", flush=True)
    uvicorn.run(
        box.app, host=host, port=port, log_level=log_level, access_log=False, log_config=None
    )
