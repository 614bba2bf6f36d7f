"""Receiver throughput: accepted deliveries per second with signature check and durable insert,
against the naive app (bench/naive_app.py: the same two INSERTs, a commit per request) on the same
database, and a bare Starlette endpoint answering 200 for scale; same load client (wrk) on loopback,
same run, at each of ``--connections`` (providers deliver over few connections at once).

Each server is one uvicorn process pinned to CPU 0; wrk runs pinned to CPU 1 (the database server is
not pinned). Arms are interleaved over the rounds; the median of each arm is reported with its ratio
to the naive app's median on the same database. Every arm's responses must all be 200 and the
database must hold exactly as many accepted events as wrk completed requests.

    python bench/receiver.py [--seconds 5] [--rounds 3] [--connections 1,4,16,64] [--payload large|small] [--no-postgres]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import PYTHON, ROOT, free_port, median, pg_schema, pinned, process, sqlite_db
from connectors.providers.github.signature import github_sign
from reconciler.storage.engine import make_engine
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS

SECRET = "bench-secret"
FIXTURE = ROOT / "tests" / "fixtures" / "providers" / "github" / "push.payload.json"

LUA = """
local counter = 0
wrk.method = "POST"
wrk.body = {body}
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-GitHub-Event"] = "push"
wrk.headers["X-Hub-Signature-256"] = "{signature}"
request = function()
  counter = counter + 1
  wrk.headers["X-GitHub-Delivery"] = "{prefix}-" .. counter
  return wrk.format()
end
"""


def body(size: str) -> bytes:
    """``large``: GitHub's push example (6.7 KB); ``small``: a 1.2 KB event."""
    if size == "large":
        return json.dumps(json.loads(FIXTURE.read_text())).encode()
    commit = {
        "id": "0" * 40,
        "message": "Update README.md",
        "author": {"name": "Octo Cat", "email": "octo@example.com"},
    }
    doc = {
        "ref": "refs/heads/main",
        "before": "a" * 40,
        "after": "b" * 40,
        "repository": {"id": 1296269, "full_name": "octocat/Hello-World"},
        "commits": [commit] * 3,
    }
    return json.dumps(doc).encode()


PAYLOAD = "large"


def run_wrk(url: str, seconds: int, connections: int, workdir: Path) -> tuple[float, int, int]:
    payload = body(PAYLOAD)
    script = workdir / f"{uuid.uuid4().hex}.lua"
    script.write_text(
        LUA.format(
            body=json.dumps(payload.decode()),
            signature=github_sign(payload, SECRET),
            prefix=uuid.uuid4().hex,
        )
    )
    out = subprocess.run(
        pinned(1, ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), url]),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, total, int(bad.group(1)) if bad else 0


def every_kind() -> str:
    """A ``[[sources]]`` table of every other registered kind (the keys each needs: tests/kinds.py),
    beside the GitHub source the load is sent to."""
    from connectors.registry import kinds
    from tests.kinds import EXTRA_KEYS

    tables = []
    for kind in kinds():
        if kind == "github":
            continue
        keys = {"name": f"x-{kind}", "kind": kind, "signing_secret_env": "BENCH_SECRET"}
        keys |= EXTRA_KEYS.get(kind, {})
        if kind in ("gopay", "mollie", "paypal"):
            keys["base_url"] = "http://127.0.0.1:9"
        tables.append(
            "[[sources]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
        )
    return "".join(tables)


def receiver_arm(
    db_url: str,
    seconds: int,
    connections: int,
    workdir: Path,
    batch: int = 256,
    others: str = "",
) -> float:
    port = free_port()
    cfg = workdir / f"config-{port}.toml"
    cfg.write_text(
        f'[database]\nurl = "{db_url}"\n[logging]\nlevel = "WARNING"\n[receiver]\nbatch_max_size = {batch}\n'
        '[[sources]]\nname = "github"\nkind = "github"\nsigning_secret_env = "BENCH_SECRET"\n'
        + others
    )
    engine = make_engine(db_url)
    with engine.connect() as conn:
        before = conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one()
    argv = pinned(
        0, [PYTHON, "-m", "reconciler.cli.main", "serve", "--config", str(cfg), "--port", str(port)]
    )
    env = {"BENCH_SECRET": SECRET, "T_GOPAY_ID": "x", "T_GOPAY_SECRET": "x"}
    with process(argv, f"http://127.0.0.1:{port}/healthz", env=env):
        rps, total, bad = run_wrk(
            f"http://127.0.0.1:{port}/webhooks/github", seconds, connections, workdir
        )
    with engine.connect() as conn:
        after = conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one()
        accepted = conn.execute(
            select(func.count()).select_from(DELIVERIES).where(DELIVERIES.c.outcome == "accepted")
        ).scalar_one()
    engine.dispose()
    stored = after - before
    # wrk may stop waiting for a few in-flight requests at the deadline; those are stored too.
    if bad or not (total <= stored <= total + connections) or accepted != after:
        raise SystemExit(
            f"receiver arm inconsistent: wrk {total} ok, {bad} bad; stored {stored}, accepted {accepted}"
        )
    return rps


def naive_arm(db_url: str, seconds: int, connections: int, workdir: Path) -> float:
    port = free_port()
    engine = make_engine(db_url)
    with engine.connect() as conn:
        before = conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one()
    argv = pinned(0, [PYTHON, str(ROOT / "bench" / "naive_app.py"), str(port), db_url, SECRET])
    with process(argv, f"http://127.0.0.1:{port}/healthz"):
        rps, total, bad = run_wrk(
            f"http://127.0.0.1:{port}/webhooks/github", seconds, connections, workdir
        )
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one() - before
    engine.dispose()
    if bad or not (total <= stored <= total + connections):
        raise SystemExit(f"naive arm inconsistent: wrk {total} ok, {bad} bad; stored {stored}")
    return rps


def bare_arm(seconds: int, connections: int, workdir: Path) -> float:
    port = free_port()
    argv = pinned(0, [PYTHON, str(ROOT / "bench" / "bare_app.py"), str(port)])
    with process(argv, f"http://127.0.0.1:{port}/"):
        rps, _total, bad = run_wrk(
            f"http://127.0.0.1:{port}/webhooks/github", seconds, connections, workdir
        )
    if bad:
        raise SystemExit(f"bare arm had {bad} non-2xx responses")
    return rps


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", default="1,4,16,64", help="comma-separated")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--payload", choices=["small", "large"], default="large")
    parser.add_argument(
        "--every-kind",
        action="store_true",
        help="also an arm whose receiver has a source of every registered kind configured",
    )
    args = parser.parse_args()
    global PAYLOAD
    PAYLOAD = args.payload
    if not shutil.which("wrk"):
        raise SystemExit("wrk is needed (Debian: apt-get install wrk)")
    counts = [int(c) for c in args.connections.split(",")]
    others = every_kind() if args.every_kind else ""
    results: dict[tuple[int, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with sqlite_db(workdir, "bench.db") as sqlite_url:
            pg = pg_schema() if not args.no_postgres else None
            pg_url = pg.__enter__() if pg else None
            databases = {"sqlite": sqlite_url, **({"postgresql": pg_url} if pg_url else {})}
            try:
                for r in range(args.rounds):
                    for c in counts:
                        arms: dict[str, Callable[[], float]] = {
                            "bare": partial(bare_arm, args.seconds, c, workdir)
                        }
                        for name, url in databases.items():
                            arms[f"{name} naive"] = partial(
                                naive_arm, url, args.seconds, c, workdir
                            )
                            arms[f"{name} receiver"] = partial(
                                receiver_arm, url, args.seconds, c, workdir
                            )
                            if args.every_kind:
                                arms[f"{name} receiver, all kinds"] = partial(
                                    receiver_arm, url, args.seconds, c, workdir, others=others
                                )
                        for arm, run in arms.items():
                            results.setdefault((c, arm), []).append(run())
                        print(
                            f"round {r + 1}, {c} connections: "
                            + ", ".join(f"{a} {results[(c, a)][-1]:.0f}/s" for a in arms),
                            flush=True,
                        )
            finally:
                if pg:
                    pg.__exit__(None, None, None)
    print(f"\npayload {len(body(PAYLOAD))} bytes, {args.rounds} rounds of {args.seconds} s")
    print(f"{'connections':>11}  {'arm':<22}{'median req/s':>13}{'range':>17}{'÷ naive':>9}")
    for c in counts:
        for (count, arm), values in results.items():
            if count != c:
                continue
            m = median(values)
            naive = results.get((c, arm.split(",")[0].replace("receiver", "naive")))
            ratio = f"{m / median(naive):.2f}" if naive and "receiver" in arm else ""
            spread = f"{min(values):.0f}-{max(values):.0f}"
            print(
                f"{c:>11}  {arm:<22}{m:>13.0f}{spread:>17}{ratio:>9}   (goal ≥ 1.0)"
                if ratio
                else f"{c:>11}  {arm:<22}{m:>13.0f}{spread:>17}"
            )

    for (c, arm), values in results.items():
        one = results.get((c, arm.removesuffix(", all kinds")))
        if arm.endswith(", all kinds") and one:
            ratios = sorted(a / b for a, b in zip(values, one, strict=True))
            print(
                f"{c:>11}  {arm} ÷ one kind, per round: median {median(ratios):.2f} "
                f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}; goal: 1.0 within noise)"
            )


if __name__ == "__main__":
    main()
