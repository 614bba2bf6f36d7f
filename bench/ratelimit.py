"""Reconciliation against a provider with real latency and a rate limit (issue 23): is hookledger
bound by the rate limit rather than by the latency?

The sandbox answers every call after ``--latency-ms`` (give or take 20 %) and allows ``--rate-limit``
calls a second (beyond: Stripe's own 429). Events are spread over ``--days`` days; the scan reads
all of them (``initial_lookback_hours``: the whole span). Arms, each a fresh process, interleaved:

- ``sliced``: ``Reconciler.run(full=True)`` as configured for that provider (``max_requests_per_second``
  = the limit, ``max_concurrency`` about limit x latency, plus a margin), with the business check of
  bench/reconcile.py. Measured against THE FLOOR the limit allows: list pages ÷ limit.
- ``sdk`` (at ``--sdk-size`` events): the official ``stripe`` SDK's ``auto_paging_iter`` over the
  same window, sequential as every SDK pages: what a checker built on it waits for. The sliced arm
  runs at that size too, in the same rounds, for the paired ratio.

With ``--defaults`` (issue 34) the sliced arm runs at the provider's default budget (no
``max_requests_per_second`` or ``max_concurrency`` configured) and its baseline ``burst1s`` is the same
run with a token bucket that saves up a second's worth of requests (the budget's former default), both
against the sandbox's limiter: at most ``--rate-limit`` calls in any sliding second, as Stripe counts.

The database (SQLite, or PostgreSQL with ``--postgres``) is populated with latency and limit off.

    python bench/ratelimit.py --sizes 100000 1000000 --rounds 3
    python bench/ratelimit.py --sizes 1000 --rounds 1 --sdk-size 1000     # a smoke run (CI)
    python bench/ratelimit.py --defaults --rate-limit 25 --sizes 10000 --sdk-size 0 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KEY = "sk_test_sandbox"


def sdk_arm(sandbox: str, hours: float) -> dict[str, Any]:
    import stripe

    from bench.reconcile import peak_rss_mb

    since = int(time.time() - hours * 3600)
    client = stripe.StripeClient(KEY, base_addresses={"api": sandbox}, max_network_retries=5)
    t = time.perf_counter()
    count = sum(
        1
        for _ in client.v1.events.list({"limit": 100, "created": {"gte": since}}).auto_paging_iter()
    )
    return {"seconds": time.perf_counter() - t, "count": count, "maxrss_mb": peak_rss_mb()}


def run_child(arm: str, db: str, sandbox: str, env: dict[str, str]) -> dict[str, Any]:
    from bench.common import PYTHON, ROOT

    if arm == "sdk":
        argv = [PYTHON, __file__, "--arm", "sdk", "--sandbox", sandbox]
    elif arm == "burst1s":
        argv = [PYTHON, str(ROOT / "bench" / "reconcile.py"), "--arm", "sliced"]
        argv += ["--db", db, "--sandbox", sandbox]
        env = {**env, "BENCH_BURST": "1"}
    else:
        argv = [PYTHON, str(ROOT / "bench" / "reconcile.py"), "--arm", "sliced"]
        argv += ["--db", db, "--sandbox", sandbox]
    started = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env={**os.environ, **env})
    whole = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"arm {arm} failed:\n{out.stderr[-3000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "process_seconds": whole}


def faults(url: str, **values: Any) -> None:
    httpx.post(f"{url}/_sandbox/faults", json=values, timeout=10).raise_for_status()


def stats(url: str) -> dict[str, Any]:
    return dict(httpx.get(f"{url}/_sandbox/stats", timeout=10).json())


def main() -> None:
    from bench.common import PYTHON, ROOT, free_port, median, pg_schema, process, sqlite_db
    from bench.reconcile import populate

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--rate-limit", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=40)
    parser.add_argument("--days", type=float, default=29.0, help="(Stripe lists 30 days)")
    parser.add_argument("--sdk-size", type=int, default=20_000, help="0: no SDK arm")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="the provider's default budget, against a baseline that saves up a second's worth",
    )
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    parser.add_argument("--sandbox", help=argparse.SUPPRESS)
    args = parser.parse_args()
    hours = args.days * 24 + 1
    if args.arm == "sdk":
        print(json.dumps(sdk_arm(args.sandbox, hours)))
        return
    env = {
        "BENCH_HOURS": str(math.ceil(hours)),
        "BENCH_RATE": "default" if args.defaults else str(args.rate_limit),
        "BENCH_CONCURRENCY": str(args.concurrency),
    }
    sizes = sorted(set(args.sizes + ([args.sdk_size] if args.sdk_size else [])))
    table = []
    for n in sizes:
        port = free_port()
        argv = [PYTHON, str(ROOT / "bench" / "sandbox_server.py"), str(port), str(n), "0", "0"]
        url = f"http://127.0.0.1:{port}"
        with (
            process([*argv, str(hours - 1)], f"{url}/_sandbox/health", start_timeout=60 + n / 2000),
            tempfile.TemporaryDirectory() as tmp,
            pg_schema() if args.postgres else sqlite_db(Path(tmp), "bench.db") as db,
        ):
            withheld, _ = populate(db, url, hours=hours)
            faults(url, latency_ms=args.latency_ms, rate_limit=args.rate_limit)
            arms = ["sliced"] + (["sdk"] if n == args.sdk_size else [])
            if args.defaults:
                arms.append("burst1s")
            results: dict[str, list[dict[str, Any]]] = {a: [] for a in arms}
            for r in range(args.rounds):
                for arm in arms if r % 2 == 0 else arms[::-1]:
                    before = stats(url)
                    result = run_child(arm, db, url, env)
                    after = stats(url)
                    result["calls"] = after["calls"] - before["calls"]
                    result["throttled"] = after["throttled"] - before["throttled"]
                    results[arm].append(result)
                print(
                    f"n={n} round {r + 1}: "
                    + ", ".join(
                        f"{a} {results[a][-1]['process_seconds']:.1f}s "
                        f"({results[a][-1]['calls']} calls, {results[a][-1]['throttled']} 429)"
                        for a in arms
                    ),
                    flush=True,
                )
            for arm in ("sliced", "burst1s"):
                if arm in results and {x["count"] for x in results[arm]} != {withheld}:
                    raise SystemExit(f"the {arm} arm did not find the {withheld} withheld events")
            if "sdk" in results and {x["count"] for x in results["sdk"]} != {n}:
                raise SystemExit(f"the SDK arm did not list {n} events")
            pages = math.ceil(n / 100)
            floor = pages / args.rate_limit
            sliced = results["sliced"]
            row: dict[str, Any] = {
                "n": n,
                "floor_s": floor,
                "sliced_s": median([x["process_seconds"] for x in sliced]),
                "over_floor": [x["process_seconds"] / floor for x in sliced],
                "throttled": [x["throttled"] / max(1, x["calls"]) for x in sliced],
                "calls": median([x["calls"] for x in sliced]),
                "mb": max(x["maxrss_mb"] for x in sliced),
            }
            if "burst1s" in results:
                base = results["burst1s"]
                row["base_throttled"] = [x["throttled"] / max(1, x["calls"]) for x in base]
                row["base_ratio"] = [
                    x["process_seconds"] / b["process_seconds"]
                    for x, b in zip(sliced, base, strict=True)
                ]
                row["cpu_ratio"] = [
                    x["cpu_seconds"] / b["cpu_seconds"] for x, b in zip(sliced, base, strict=True)
                ]
            if "sdk" in results:
                row["sdk_s"] = median([x["seconds"] for x in results["sdk"]])
                row["sdk_ratio"] = [
                    s["seconds"] / x["process_seconds"]
                    for s, x in zip(results["sdk"], sliced, strict=True)
                ]
            table.append(row)
    report(table, args)


def report(table: list[dict[str, Any]], args: argparse.Namespace) -> None:
    from bench.common import median

    def spread(values: list[float]) -> str:
        return f"{median(values):.2f} ({min(values):.2f}-{max(values):.2f})"

    print(
        f"\nlatency {args.latency_ms:g} ms, limit {args.rate_limit:g}/s, "
        f"max_concurrency {args.concurrency}, {args.rounds} rounds, "
        f"{'PostgreSQL' if args.postgres else 'SQLite'}"
    )
    print(
        f"{'events':>9} {'floor s':>8} {'sliced s':>9} {'÷ floor':>18} {'429 share':>20} "
        f"{'calls':>7} {'MB':>6} {'sdk s':>8} {'sdk ÷ sliced':>20}"
    )
    for row in table:
        if "base_throttled" in row:
            print(
                f"{'':>9} baseline burst1s: 429 share {spread(row['base_throttled'])}; sliced ÷ "
                f"burst1s wall {spread(row['base_ratio'])}, CPU {spread(row['cpu_ratio'])}"
            )
        sdk = (
            f"{row['sdk_s']:>8.1f} {spread(row['sdk_ratio']):>20}"
            if "sdk_s" in row
            else f"{'':>8} {'':>20}"
        )
        print(
            f"{row['n']:>9} {row['floor_s']:>8.1f} {row['sliced_s']:>9.1f} "
            f"{spread(row['over_floor']):>18} {spread(row['throttled']):>20} "
            f"{row['calls']:>7.0f} {row['mb']:>6.0f} {sdk}"
        )
    print(
        "sliced s: whole process (spawn to exit); floor: list pages ÷ the limit; calls: every API\n"
        "call of the run (pages and look-ups), 429 share: of those, refused by the limit\n"
        "goals (issue 23): ÷ floor <= 1.25 at 100k and 1M; sdk ÷ sliced >= 5; 429 share <= 1 %;\n"
        "peak RSS at 1M <= 1.25x the 100k figure"
    )


if __name__ == "__main__":
    main()
