"""Serve a sandbox world of a chosen size (for benchmarks).

    python bench/sandbox_server.py PORT STRIPE_EVENTS GITHUB_DELIVERIES SHOPIFY_ORDERS [SPAN_HOURS]

Latency and a rate limit are switched on and off while it runs (``POST /_sandbox/faults``)."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world

if __name__ == "__main__":
    port, stripe_n, github_n, shopify_n = (int(x) for x in sys.argv[1:5])
    span_hours = float(sys.argv[5]) if len(sys.argv) > 5 else 24.0  # how far back events go
    world = build_world(
        1,
        stripe_events=stripe_n,
        github_deliveries=github_n,
        shopify_orders=shopify_n,
        span=timedelta(hours=span_hours),
    )
    # A large call-limit bucket: this measures paging, not Shopify's rate limit (tested elsewhere).
    uvicorn.run(
        Sandbox(world, shopify_bucket=1_000_000).app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
    )
