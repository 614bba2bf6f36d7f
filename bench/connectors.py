"""Connector paging throughput (records/s) against the sandbox, vs a bare httpx loop, same run.

The bare loop fetches the same pages with the same page size and only decodes the JSON (following
Stripe's ``starting_after`` / the ``Link`` header itself). The sandbox runs in its own process pinned to
CPU 0, the client to CPU 1. Arms alternate over the rounds; medians are reported; both arms must see
the same number of records. Goal: ratio >= 0.9 for every connector.

    python bench/connectors.py [--rounds 5] [--stripe 20000] [--github 5000] [--shopify 5000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import PYTHON, ROOT, free_port, median, pinned, process
from connectors.base import ScanOptions
from connectors.http import parse_link_header
from reconciler.config import parse_settings
from reconciler.sources import build_connector

ENV = {"B_STRIPE": "sk_test_sandbox", "B_GITHUB": "ghp_sandbox", "B_SHOPIFY": "shpat_sandbox"}


def connector_arm(kind: str, url: str) -> tuple[float, int]:
    extra: dict[str, Any] = {
        "stripe": {},
        "github": {"repository": "o/r", "hook_id": 1},
        "shopify": {},
    }[kind]
    env = {"stripe": "B_STRIPE", "github": "B_GITHUB", "shopify": "B_SHOPIFY"}[kind]
    src = parse_settings(
        {"sources": [{"name": kind, "kind": kind, "base_url": url, "api_key_env": env, **extra}]},
        "<bench>",
    ).sources[0]
    connector = build_connector(src, environ=ENV)
    t = time.perf_counter()
    n = 0
    for page in connector.pages(
        None, ScanOptions(now=datetime.now(UTC), initial_lookback=timedelta(hours=48))
    ):
        n += len(page.records)
    elapsed = time.perf_counter() - t
    connector.close()
    return n / elapsed, n


def bare_arm(kind: str, url: str) -> tuple[float, int]:
    since = int((datetime.now(UTC) - timedelta(hours=48)).timestamp())
    n = 0
    with httpx.Client(base_url=url, timeout=30) as client:
        t = time.perf_counter()
        if kind == "stripe":
            params: dict[str, Any] = {"limit": 100, "created[gte]": since}
            client.headers["Authorization"] = "Bearer sk_test_sandbox"
            while True:
                body = client.get("/v1/events", params=params).json()
                n += len(body["data"])
                if not body["has_more"]:
                    break
                params = {
                    "limit": 100,
                    "created[gte]": since,
                    "starting_after": body["data"][-1]["id"],
                }
        else:
            if kind == "github":
                client.headers["Authorization"] = "Bearer ghp_sandbox"
                next_url: str | None = "/repos/o/r/hooks/1/deliveries?per_page=100"
            else:
                client.headers["X-Shopify-Access-Token"] = "shpat_sandbox"
                floor = (datetime.now(UTC) - timedelta(hours=48)).isoformat()
                next_url = str(
                    httpx.URL(
                        "/admin/api/2025-01/orders.json",
                        params={"status": "any", "updated_at_min": floor, "limit": 250},
                    )
                )
            while next_url:
                response = client.get(next_url)
                body = response.json()
                n += len(body if kind == "github" else body["orders"])
                next_url = parse_link_header(response.headers.get("link")).get("next")
        elapsed = time.perf_counter() - t
    return n / elapsed, n


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stripe", type=int, default=20_000)
    parser.add_argument("--github", type=int, default=5_000)
    parser.add_argument("--shopify", type=int, default=5_000)
    args = parser.parse_args()
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    port = free_port()
    argv = pinned(
        0,
        [
            PYTHON,
            str(ROOT / "bench" / "sandbox_server.py"),
            str(port),
            str(args.stripe),
            str(args.github),
            str(args.shopify),
        ],
    )
    url = f"http://127.0.0.1:{port}"
    results: dict[str, dict[str, list[float]]] = {
        k: {"connector": [], "bare": []} for k in ("stripe", "github", "shopify")
    }
    with process(argv, f"{url}/_sandbox/health"):
        for r in range(args.rounds):
            for kind, arms in results.items():
                first, second = ("bare", "connector") if r % 2 == 0 else ("connector", "bare")
                counts = {}
                for arm in (first, second):
                    rate, n = (bare_arm if arm == "bare" else connector_arm)(kind, url)
                    arms[arm].append(rate)
                    counts[arm] = n
                if counts["bare"] != counts["connector"]:
                    raise SystemExit(
                        f"{kind}: bare saw {counts['bare']} records, connector {counts['connector']}"
                    )
            print(
                f"round {r + 1}: "
                + ", ".join(
                    f"{k} {v['connector'][-1]:.0f}/{v['bare'][-1]:.0f}" for k, v in results.items()
                ),
                flush=True,
            )
    print(f"\n{'connector':<10}{'records/s':>12}{'bare records/s':>16}{'ratio':>8}   goal >= 0.9")
    for kind, arms in results.items():
        c, b = median(arms["connector"]), median(arms["bare"])
        print(f"{kind:<10}{c:>12.0f}{b:>16.0f}{c / b:>8.2f}")


if __name__ == "__main__":
    main()
