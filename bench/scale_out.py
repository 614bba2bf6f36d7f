"""Scale-out on one PostgreSQL: receiver and worker throughput with 1, 2 and 4 processes of each,
against the 1-process arm measured in the same round (the baseline: what one process does).

- Receivers: N ``hookledger serve`` processes, each loaded by its own wrk with the same total number
  of connections split between them (a load balancer's share), for ``--seconds``; accepted
  deliveries a second, summed. Every answer must be 200 and every accepted delivery stored once.
- Workers: ``--events`` stored events, then N ``hookledger worker --once`` processes with a no-op
  handler started together; events a second from their start to the last one's exit (process
  start-up included: a worker a user starts pays it too). Every event must be processed exactly once
  (one attempt each), whichever process claimed it.

Nothing is pinned: the processes, wrk and PostgreSQL share the machine's cores, which is what
bounds the figures on a small host (docs/operations.md, "Scale-out on PostgreSQL").

    python bench/scale_out.py [--processes 1,2,4] [--seconds 5] [--events 20000] [--connections 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from sqlalchemy import Engine, func, select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import PYTHON, free_port, median, pg_schema, process
from bench.receiver import SECRET, run_wrk
from bench.worker import load
from reconciler.storage.engine import make_engine
from reconciler.storage.models import INBOX_EVENTS, PROCESSING_ATTEMPTS, Base

HANDLERS = """
from reconciler.inbox.handlers import handler


@handler("stripe", "*")
def noop(event, conn):
    return None
"""


def config(workdir: Path, url: str) -> Path:
    path = workdir / "scale.toml"
    path.write_text(
        f'[database]\nurl = "{url}"\n[logging]\nlevel = "WARNING"\n'
        '[worker]\nhandlers = ["bench_scale_handlers"]\nbatch_size = 200\n'
        '[[sources]]\nname = "github"\nkind = "github"\nsigning_secret_env = "BENCH_SECRET"\n'
        '[[sources]]\nname = "stripe"\nkind = "stripe"\nsigning_secret_env = "BENCH_SECRET"\n'
    )
    (workdir / "bench_scale_handlers.py").write_text(HANDLERS)
    return path


def count(engine: Engine, table: object) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


def clear(engine: Engine) -> None:
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())


@contextmanager
def receivers(cfg: Path, n: int) -> Iterator[list[int]]:
    ports = [free_port() for _ in range(n)]
    with ExitStack() as stack:
        for port in ports:
            argv = [
                PYTHON, "-m", "reconciler.cli.main", "serve", "--config", str(cfg), "--port", str(port)
            ]  # fmt: skip
            stack.enter_context(
                process(argv, f"http://127.0.0.1:{port}/healthz", env={"BENCH_SECRET": SECRET})
            )
        yield ports


def receiver_arm(
    engine: Engine, cfg: Path, n: int, seconds: int, connections: int, workdir: Path
) -> float:
    clear(engine)
    with receivers(cfg, n) as ports:
        share = [connections // n + (i < connections % n) for i in range(n)]
        results: list[tuple[float, int, int]] = []
        # one wrk a receiver, all at once (threads: each waits on its own subprocess)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(n) as pool:
            futures = [
                pool.submit(
                    run_wrk, f"http://127.0.0.1:{port}/webhooks/github", seconds, c, workdir
                )
                for port, c in zip(ports, share, strict=True)
            ]
            results = [f.result() for f in futures]
    total = sum(r[1] for r in results)
    bad = sum(r[2] for r in results)
    stored = count(engine, INBOX_EVENTS)
    if bad or not (total <= stored <= total + connections):
        raise SystemExit(f"{n} receivers inconsistent: wrk {total} ok, {bad} bad; stored {stored}")
    return sum(r[0] for r in results)


def worker_arm(engine: Engine, cfg: Path, n: int, events: int, workdir: Path) -> float:
    load(engine, events)  # (clears the tables first)
    argv = [PYTHON, "-m", "reconciler.cli.main", "worker", "--once", "--config", str(cfg)]
    env = {**os.environ, "PYTHONPATH": f"{workdir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    started = time.perf_counter()
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL) for _ in range(n)]
    codes = [p.wait(timeout=600) for p in procs]
    elapsed = time.perf_counter() - started
    attempts = count(engine, PROCESSING_ATTEMPTS)
    with engine.connect() as conn:
        processed = conn.execute(
            select(func.count())
            .select_from(INBOX_EVENTS)
            .where(INBOX_EVENTS.c.status == "processed")
        ).scalar_one()
    if codes != [0] * n or processed != events or attempts != events:
        raise SystemExit(
            f"{n} workers inconsistent: exit {codes}, {processed} processed, {attempts} attempts "
            f"of {events} events"
        )
    return events / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--processes", default="1,2,4", help="comma-separated; 1 is the baseline")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=16, help="in total, split evenly")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    counts = sorted({1, *(int(c) for c in args.processes.split(","))})
    results: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp, pg_schema() as url:
        workdir = Path(tmp)
        cfg = config(workdir, url)
        engine = make_engine(url)
        try:
            for r in range(args.rounds):
                for n in counts:  # interleaved: each round runs every arm once
                    results.setdefault(("receivers", n), []).append(
                        receiver_arm(engine, cfg, n, args.seconds, args.connections, workdir)
                    )
                    results.setdefault(("workers", n), []).append(
                        worker_arm(engine, cfg, n, args.events, workdir)
                    )
                line = ", ".join(
                    f"{kind} x{n} {values[-1]:.0f}/s" for (kind, n), values in results.items()
                )
                print(f"round {r + 1}: {line}", flush=True)
        finally:
            engine.dispose()
    print(
        f"\nPostgreSQL, {os.cpu_count()} cores, {args.rounds} rounds; receivers: {args.connections} "
        f"connections in total for {args.seconds} s; workers: {args.events} events, start-up included"
    )
    print(
        f"{'arm':<11}{'processes':>10}{'median /s':>11}{'range':>13}{'÷ 1 process, per round':>25}"
    )
    for (kind, n), values in results.items():
        ratios = [v / b for v, b in zip(values, results[(kind, 1)], strict=True)]
        spread = f"{min(values):.0f}-{max(values):.0f}"
        ratio = f"{median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        print(f"{kind:<11}{n:>10}{median(values):>11.0f}{spread:>13}{ratio:>25}")


if __name__ == "__main__":
    main()
