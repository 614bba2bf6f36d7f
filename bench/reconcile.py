"""Reconciliation against the sandbox: time and peak memory, against a bare paging loop and two naive
baselines, on SQLite and PostgreSQL, for each size, in one run.

Arms, each in a fresh process (so its peak RSS is its own), interleaved over the rounds:
- ``bare_orjson``: page the source with httpx and decode with orjson, as the connectors do, nothing
  else: THE FLOOR, the loop a competent hand-written checker would start from;
- ``bare``: the same loop decoding with stdlib ``json`` (shown for the decoder's share);
- ``checker`` (PostgreSQL): the hand-written checker the configured run is held against: the floor's
  paging loop plus, per page, the same two comparisons with psycopg and ``= ANY(%s)``: which of
  the page's event ids the inbox lacks, and each invoice's row against its newest snapshot (each
  invoice compared once, on the page with its newest event). It stores nothing;
- ``reconcile``: ``Reconciler.run(full=True)`` configured as a user would: one business check with
  ``fields`` (``bench_invoices``: each invoice's status and amount, as the application stored them),
  so each page also costs its business look-up (the real thing: pages, batched lookups, upserts);
- ``typed``: the ``reconcile`` arm with the source's ``event_types = ["invoice.paid"]``: it lists and
  checks the events hookrecon lists (``types[]=invoice.paid``), the pair held against hookrecon's;
- ``sliced``: the same run with 8 requests in flight and no rate limit (time slices, as a source's
  default ``max_concurrency`` reads Stripe): on loopback, with no latency to hide, it must cost no
  more than the sequential run;
- ``lookup``: page the source and run one SELECT per event (how simple checkers work);
- ``pandas``: load every source event and the whole inbox into pandas and merge.
- ``baseline`` (with ``--baseline PATH``): the ``reconcile`` arm of another checkout (a ``git
  worktree`` of an earlier commit), on the same data in the same rounds: a paired old/new ratio.
- ``hookrecon`` (PostgreSQL, with ``--hookrecon PYTHON``: the interpreter of a venv holding
  ``hookrecon``): another tool's ``hookrecon check`` with the same business check (each listed
  ``invoice.paid`` event's invoice must have a row), the stripe package pointed at the sandbox. A
  yardstick for whole-process time and memory: it lists one event type and compares no inbox, so
  its count is its own.
1% of the events are withheld from the inbox: every arm but ``bare`` must report the same missing count.
Each arm is timed twice: in-process (from after its imports to the end of its work) and as a whole
process (spawn to exit: interpreter start-up and imports included, as a user running the command pays).

    python bench/reconcile.py --sizes 10000 100000 --rounds 5 [--no-postgres | --no-sqlite]
    git worktree add /tmp/before <commit> && python bench/reconcile.py --baseline /tmp/before --arms reconcile baseline
    python bench/reconcile.py --sizes 1000000 --rounds 3 --lookup-rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reconciler.process import freeze_startup_objects

# bench.common (SQLAlchemy, the storage layer) is imported by the parent only: an arm's process
# imports what that arm uses, so the floor's whole-process time and peak RSS are a bare loop's.

KEY = "sk_test_sandbox"
ARMS = (
    "bare_orjson",
    "bare",
    "checker",
    "reconcile",
    "typed",
    "sliced",
    "lookup",
    "pandas",
    "baseline",
    "hookrecon",
)
# the headline pair first: the configured run against the orjson floor
PAIRS = (
    ("reconcile", "checker"),
    ("reconcile", "bare_orjson"),
    ("reconcile", "bare"),
    ("sliced", "reconcile"),
    ("reconcile", "baseline"),
    ("reconcile", "hookrecon"),
    ("typed", "hookrecon"),
)
# the one event type hookrecon's check lists, and the typed arm's source with it
HOOKRECON_TYPE = "invoice.paid"
# hookrecon's own process: the stripe package at the sandbox, its JSON report's drift count, and
# its peak RSS read as it exits (VmHWM: its own, whoever spawned it)
HOOKRECON = """
import atexit, json, sys
from pathlib import Path
import stripe
stripe.api_base = sys.argv[1]
def hwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            print("HWM", int(line.split()[1]) / 1024)
atexit.register(hwm)
from hookrecon.cli import main
code = main(["check", "--json", "--limit", "100000000"])
sys.stdout.flush()
sys.exit(code)
"""


def page_events(sandbox: str, decode: Any = None, hours: float = 48) -> Any:
    """The source's events, page by page, as the bare loop reads them (``decode``: bytes -> JSON,
    default ``response.json()``), created in the last ``hours``."""
    since = int((datetime.now(UTC) - timedelta(hours=hours)).timestamp())
    with httpx.Client(
        base_url=sandbox, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
    ) as client:
        params: dict[str, Any] = {"limit": 100, "created[gte]": since}
        while True:
            response = client.get("/v1/events", params=params)
            body = decode(response.content) if decode else response.json()
            yield body["data"]
            if not body["has_more"]:
                return
            params = {"limit": 100, "created[gte]": since, "starting_after": body["data"][-1]["id"]}


def populate(db: str, sandbox: str, hours: float = 48) -> tuple[int, int]:
    """The inbox with every 100th event withheld, and the business table; returns how many events
    were withheld, in all and of ``HOOKRECON_TYPE``."""
    from sqlalchemy import update

    from connectors.providers.stripe.signature import parse_stripe
    from reconciler.inbox.store import IncomingEvent, store_items
    from reconciler.storage.engine import make_engine
    from reconciler.storage.models import INBOX_EVENTS, EventStatus

    engine = make_engine(db)
    withheld, withheld_typed, n = 0, 0, 0
    for page in page_events(sandbox, hours=hours):
        items = []
        for event in page:
            n += 1
            if n % 100 == 0:
                withheld += 1
                withheld_typed += event["type"] == HOOKRECON_TYPE
                continue
            body = json.dumps(event).encode()
            items.append(
                IncomingEvent("stripe", parse_stripe({}, body), body, {}, datetime.now(UTC))
            )
        with engine.begin() as conn:
            store_items(conn, items)
    _business_table(engine, sandbox, hours)
    # Applied, as a live inbox's events mostly are: left pending, every one of them became "stuck" an
    # hour after this (stuck_after_seconds), and a long benchmark's later rounds timed a stuck pass
    # over the whole inbox that its first rounds did not.
    with engine.begin() as conn:
        conn.execute(
            update(INBOX_EVENTS)
            .where(INBOX_EVENTS.c.source == "stripe")
            .values(status=EventStatus.PROCESSED, processed_at=datetime.now(UTC))
        )
    # A live database has been through autovacuum: planner statistics (a freshly bulk-loaded one has
    # none, and PostgreSQL then planned the page lookup through the wrong index: 2.2x slower at 50k)
    # and a visibility map (index-only lookups without a heap visit). Done here, autovacuum does not
    # start on the fresh rows in the middle of the first round either.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        vacuum = "VACUUM " if conn.dialect.name == "postgresql" else ""
        conn.exec_driver_sql(f"{vacuum}ANALYZE inbox_events")
    engine.dispose()
    return withheld, withheld_typed


def _business_table(engine: Any, sandbox: str, hours: float = 48) -> None:
    """``bench_invoices``: each invoice as the application stored it, equal to the provider's current
    state (fetched once here, not timed), so the reconcile arm's business check reads one row per
    invoice and finds nothing to confirm: the cost measured is the check itself."""
    from sqlalchemy import Column, Integer, MetaData, String, Table, insert

    table = Table(
        "bench_invoices",
        MetaData(),
        Column("stripe_invoice_id", String(255), primary_key=True),
        Column("status", String(32)),
        Column("amount_paid", Integer),
    )
    table.drop(engine, checkfirst=True)
    table.create(engine)
    ids = {
        event["data"]["object"]["id"]
        for page in page_events(sandbox, hours=hours)
        for event in page
        if event["data"]["object"].get("object") == "invoice"
    }
    rows = []
    with httpx.Client(
        base_url=sandbox, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
    ) as client:
        for invoice_id in sorted(ids):
            current = client.get(f"/v1/invoices/{invoice_id}").json()
            rows.append(
                {
                    "stripe_invoice_id": invoice_id,
                    "status": current["status"],
                    "amount_paid": current["amount_paid"],
                }
            )
    with engine.begin() as conn:
        for start in range(0, len(rows), 5000):
            conn.execute(insert(table), rows[start : start + 5000])


def bench_connector_factory(settings: Any) -> Any:
    """The run's own connector factory; with BENCH_BURST, its budget saves up that many seconds'
    worth of requests (bench/ratelimit.py's baseline: a token bucket holding a second's worth)."""
    import dataclasses

    from connectors.registry import build_connector as build_from_options
    from reconciler.sources import options_of, run_connector_factory

    burst_seconds = os.environ.get("BENCH_BURST")
    if not burst_seconds:
        return run_connector_factory(settings)

    def build(source: Any) -> Any:
        options = options_of(source)
        budget = options.budget
        assert budget is not None and budget.rate is not None
        burst = budget.rate * float(burst_seconds)
        return build_from_options(
            dataclasses.replace(options, budget=dataclasses.replace(budget, burst=burst))
        )

    return build


def arm(name: str, db: str, sandbox: str) -> dict[str, Any]:
    # Imports are not the work being measured: each arm loads what it uses before the clock starts
    # (and only that, so each arm's peak RSS is its own).
    if name == "pandas":
        import pandas  # noqa: F401
    if name in ("bare_orjson", "checker"):
        import orjson
    if name == "checker":
        import psycopg
    if not name.startswith("bare") and name != "checker":
        from sqlalchemy.engine import make_url

        import reconciler.reconcile.run  # noqa: F401

        make_url(db).get_dialect().import_dbapi()  # the database driver (psycopg: ~0.15 s here)
    # Every arm then starts as `hookledger reconcile` does once loaded: the start-up heap frozen, out
    # of the full collections' reach (reconciler/process.py), so that no arm pays for walking this
    # benchmark's own imports.
    freeze_startup_objects()

    t = time.perf_counter()
    if name == "bare":
        count = sum(len(page) for page in page_events(sandbox))
    elif name == "bare_orjson":
        count = sum(len(page) for page in page_events(sandbox, orjson.loads))
    elif name == "checker":
        count = hand_written_check(db, sandbox, orjson.loads, psycopg)
    elif name in ("reconcile", "sliced", "typed"):
        from reconciler.config import parse_settings
        from reconciler.reconcile.run import Reconciler
        from reconciler.storage.engine import make_engine

        os.environ["BENCH_KEY"] = KEY
        # BENCH_RATE "default": the provider's own budget (its rate, concurrency and burst)
        budget_keys: dict[str, Any] = (
            {}
            if os.environ.get("BENCH_RATE") == "default"
            else {
                # reconcile: one request at a time, as the floor pages; sliced: 8 at once;
                # no client-side rate limit unless BENCH_RATE (bench/ratelimit.py) sets one
                "max_concurrency": int(
                    os.environ.get("BENCH_CONCURRENCY", "8" if name == "sliced" else "1")
                ),
                "max_requests_per_second": float(os.environ.get("BENCH_RATE", "0")),
            }
        )
        settings = parse_settings(
            {
                "database": {"url": db},
                "reconcile": {"grace_seconds": 0},
                "sources": [
                    {
                        "name": "stripe",
                        "kind": "stripe",
                        "base_url": sandbox,
                        "api_key_env": "BENCH_KEY",
                        "initial_lookback_hours": int(os.environ.get("BENCH_HOURS", "48")),
                        **({"event_types": [HOOKRECON_TYPE]} if name == "typed" else {}),
                        **budget_keys,
                        "checks": [
                            {
                                "object_type": "invoice",
                                "table": "bench_invoices",
                                "key": "stripe_invoice_id",
                                "fields": {"status": "status", "amount_paid": "amount_paid"},
                            }
                        ],
                    }
                ],
            },
            "<bench>",
        )
        engine = make_engine(db)
        summary = Reconciler(
            engine, settings, connector_factory=bench_connector_factory(settings)
        ).run("stripe", full=True)
        engine.dispose()
        count = summary.found.get("missing", 0)
    elif name == "lookup":
        from sqlalchemy import select

        from reconciler.storage.engine import make_engine
        from reconciler.storage.models import INBOX_EVENTS as E

        engine = make_engine(db)
        count = 0
        with engine.connect() as conn:
            for page in page_events(sandbox):
                for event in page:
                    if (
                        conn.execute(
                            select(E.c.id).where(
                                E.c.source == "stripe", E.c.event_id == event["id"]
                            )
                        ).first()
                        is None
                    ):
                        count += 1
        engine.dispose()
    else:
        import pandas as pd

        from reconciler.storage.engine import make_engine

        engine = make_engine(db)
        source = pd.DataFrame(
            [
                {"event_id": e["id"], "type": e["type"], "created": e["created"]}
                for page in page_events(sandbox)
                for e in page
            ]
        )
        local = pd.read_sql(
            "SELECT event_id, status, received_at FROM inbox_events WHERE source = 'stripe'", engine
        )
        merged = source.merge(local, on="event_id", how="left", indicator=True)
        count = int((merged["_merge"] == "left_only").sum())
        engine.dispose()
    return {
        "seconds": time.perf_counter() - t,
        "count": count,
        "maxrss_mb": peak_rss_mb(),
        "cpu_seconds": sum(os.times()[:2]),  # this process's user + sys, start-up included
    }


def hand_written_check(db: str, sandbox: str, decode: Any, psycopg: Any) -> int:
    """The checker a competent engineer would write for this one job: page the source, and per
    page ask the inbox which ids it lacks and the business table for the page's invoices, one
    ``= ANY`` query each. Returns the missing count; a diverged invoice fails the benchmark (the
    table holds each invoice's current state)."""
    url = db.replace("postgresql+psycopg://", "postgresql://")
    compared: set[str] = set()
    missing = diverged = 0
    with psycopg.connect(url, autocommit=True) as conn:
        for page in page_events(sandbox, decode):
            ids = [e["id"] for e in page]
            held = {
                row[0]
                for row in conn.execute(
                    "SELECT event_id FROM inbox_events WHERE source = 'stripe' "
                    "AND event_id = ANY(%s)",
                    (ids,),
                )
            }
            missing += len(ids) - len(held)
            newest: dict[str, Any] = {}  # newest first: an invoice's first record is its newest
            for event in page:
                obj = event["data"]["object"]
                if obj.get("object") == "invoice" and obj["id"] not in compared:
                    newest.setdefault(obj["id"], obj)
            compared.update(newest)
            for invoice_id, status, amount_paid in conn.execute(
                "SELECT stripe_invoice_id, status, amount_paid FROM bench_invoices "
                "WHERE stripe_invoice_id = ANY(%s)",
                (list(newest),),
            ):
                obj = newest[invoice_id]
                diverged += (obj["status"], obj["amount_paid"]) != (status, amount_paid)
    if diverged:
        raise SystemExit(
            f"checker: {diverged} invoices diverged; the table is not the current state"
        )
    return missing


def peak_rss_mb() -> float:
    """This process's peak RSS. Linux keeps ``ru_maxrss`` across exec, so a child spawned by this
    benchmark's heavier parent would report the parent's; ``VmHWM`` starts afresh with the exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_hookrecon(python: str, db: str, sandbox: str) -> dict[str, Any]:
    """One ``hookrecon check`` process (see the module), timed spawn to exit."""
    from bench.common import pinned

    with tempfile.TemporaryDirectory() as tmp:
        check = {
            "name": "invoices",
            "event": "invoice.paid",
            "sql": "SELECT 1 FROM bench_invoices WHERE stripe_invoice_id = $1",
            "param": "data.object.id",
        }
        config = {"stripe": {"lookbackDays": 3}, "checks": [check]}
        Path(tmp, "hookrecon.config.json").write_text(json.dumps(config))
        env = {
            **os.environ,
            "STRIPE_SECRET_KEY": KEY,
            "DATABASE_URL": db.replace("postgresql+psycopg://", "postgresql://"),
        }
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        out = subprocess.run(
            pinned(1, [python, "-c", HOOKRECON, sandbox]),
            capture_output=True,
            text=True,
            cwd=tmp,
            env=env,
        )
        whole = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = out.stdout.strip().splitlines()
    if out.returncode not in (0, 1) or not lines or not lines[-1].startswith("HWM"):
        raise SystemExit(f"hookrecon failed ({out.returncode}):\n{out.stderr[-3000:]}")
    report = json.loads("\n".join(lines[:-1]))
    drifts = sum(len(c.get("drifts", [])) for c in report.get("checks", []))
    return {
        "seconds": whole,
        "process_seconds": whole,
        "count": drifts,
        "maxrss_mb": float(lines[-1].split()[1]),
        "cpu_seconds": after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime,
    }


def run_child(name: str, db: str, sandbox: str, baseline: Path | None = None) -> dict[str, Any]:
    from bench.common import PYTHON, ROOT, pinned

    script, cwd = Path(__file__), ROOT
    if name == "baseline":  # the other checkout's own reconcile arm, importing its own code
        assert baseline is not None
        script, cwd, name = baseline / "bench" / "reconcile.py", baseline, "reconcile"
    started = time.perf_counter()
    out = subprocess.run(
        pinned(1, [PYTHON, str(script), "--arm", name, "--db", db, "--sandbox", sandbox]),
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    whole = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"arm {name} failed:\n{out.stderr[-3000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "process_seconds": whole}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument(
        "--lookup-rounds",
        type=int,
        help="rounds of the one-lookup-per-event arm (default: all; at 1M one takes 2-4 minutes)",
    )
    parser.add_argument(
        "--baseline", type=Path, help="another checkout whose reconcile arm runs as 'baseline'"
    )
    parser.add_argument(
        "--hookrecon", help="a venv's python with hookrecon installed: the hookrecon arm"
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        choices=ARMS,
        help="the arms to run (default: all but baseline and hookrecon)",
    )
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--sandbox", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:  # an arm's own process: nothing imported but what the arm uses
        print(json.dumps(arm(args.arm, args.db, args.sandbox)))
        return
    from bench.common import PYTHON, ROOT, free_port, pg_schema, pinned, process, sqlite_db

    arms = tuple(
        args.arms
        or [
            a
            for a in ARMS
            if (a != "baseline" or args.baseline) and (a != "hookrecon" or args.hookrecon)
        ]
    )
    if "baseline" in arms and args.baseline is None:
        parser.error("the baseline arm needs --baseline PATH")
    table = []
    for n in args.sizes:
        port = free_port()
        argv = pinned(
            0, [PYTHON, str(ROOT / "bench" / "sandbox_server.py"), str(port), str(n), "0", "0"]
        )
        url = f"http://127.0.0.1:{port}"
        with (
            process(argv, f"{url}/_sandbox/health", start_timeout=30 + n / 2000),
            tempfile.TemporaryDirectory() as tmp,
        ):
            dbs: dict[str, Any] = {}
            if not args.no_sqlite:
                dbs["sqlite"] = sqlite_db(Path(tmp), "bench.db")
            if not args.no_postgres:
                dbs["postgresql"] = pg_schema()
            for dialect, ctx in dbs.items():
                db = ctx.__enter__()
                try:
                    table.append(measure(args, arms, n, dialect, db, url))
                finally:
                    ctx.__exit__(None, None, None)
    report(table, arms)


def measure(
    args: argparse.Namespace, arms: tuple[str, ...], n: int, dialect: str, db: str, url: str
) -> dict[str, Any]:
    """Every arm, interleaved over the rounds, on one populated database."""
    from bench.common import median

    if dialect != "postgresql":  # (the hand-written checker and hookrecon are psycopg scripts)
        arms = tuple(a for a in arms if a not in ("checker", "hookrecon"))
    withheld, withheld_typed = populate(db, url)
    results: dict[str, list[dict[str, Any]]] = {a: [] for a in arms}
    for r in range(args.rounds):
        order = arms[r % len(arms) :] + arms[: r % len(arms)]
        ran = []
        for a in order:
            if a == "lookup" and r >= (args.lookup_rounds or args.rounds):
                continue
            if a == "hookrecon":
                results[a].append(run_hookrecon(args.hookrecon, db, url))
            else:
                results[a].append(run_child(a, db, url, args.baseline))
            ran.append(a)
        print(
            f"n={n} {dialect} round {r + 1}: "
            + ", ".join(f"{a} {results[a][-1]['seconds']:.2f}s" for a in arms if a in ran),
            flush=True,
        )
    expected = {a: {n} if a.startswith("bare") else {withheld} for a in arms}
    if "typed" in arms:
        expected["typed"] = {withheld_typed}
    expected.pop("hookrecon", None)  # (its own question: invoice.paid rows, see the module)
    counts = {a: {x["count"] for x in results[a]} for a in arms if a != "hookrecon"}
    if counts != expected:
        raise SystemExit(f"arms disagree: {counts} (withheld {withheld})")
    row: dict[str, Any] = {"n": n, "db": dialect}
    # Arms of one round run next to each other: the median of the per-round ratios is less exposed
    # to this machine's speed drifting between rounds.
    for a, b in PAIRS:
        if a in arms and b in arms:
            for key, suffix in (
                ("seconds", ""),
                ("process_seconds", " process"),
                ("cpu_seconds", " cpu"),
            ):
                ratios = [x[key] / y[key] for x, y in zip(results[a], results[b], strict=True)]
                row[f"{a}/{b}{suffix}"] = (median(ratios), min(ratios), max(ratios))
    for a in arms:
        row[f"{a}_cpu"] = median([x["cpu_seconds"] for x in results[a]])
        row[f"{a}_s"] = median([x["seconds"] for x in results[a]])
        row[f"{a}_ps"] = median([x["process_seconds"] for x in results[a]])
        row[f"{a}_mb"] = max(x["maxrss_mb"] for x in results[a])
    return row


def report(table: list[dict[str, Any]], arms: tuple[str, ...]) -> None:
    pairs = [
        f"{a}/{b}{suffix}" for a, b in PAIRS for suffix in ("", " process", " cpu") if a in arms
    ]
    mb_arms = [
        a
        for a in arms
        if a in ("bare_orjson", "checker", "reconcile", "typed", "baseline", "pandas", "hookrecon")
    ]
    print(
        f"\n{'n':>8} {'db':<10} "
        + " ".join(f"{a + ' s (process) cpu':>28}" for a in arms)
        + " "
        + " ".join(f"{a + ' MB':>14}" for a in mb_arms)
    )
    for row in table:
        cells = [
            f"{row[a + '_s']:.2f} ({row[a + '_ps']:.2f}) {row[a + '_cpu']:.2f}"
            if a + "_s" in row
            else "-"
            for a in arms
        ]
        print(
            f"{row['n']:>8} {row['db']:<10} "
            + " ".join(cell.rjust(28) for cell in cells)
            + " "
            + " ".join(f"{row.get(a + '_mb', float('nan')):>14.0f}" for a in mb_arms)
        )
        for p in pairs:
            if p in row:
                print(f"{'':>19} {p:<32} {row[p][0]:>6.2f} ({row[p][1]:.2f}-{row[p][2]:.2f})")
    print(
        "s: in-process seconds (after imports); process: spawn to exit, start-up included;\n"
        "cpu: the arm process's user + sys seconds, start-up included\n"
        "pairs: the median (and range) of each round's ratio of the two arms; the floor is\n"
        "bare_orjson (httpx + orjson paging, nothing else); the reconcile arm runs one business check\n"
        "goals (issue 49): typed/hookrecon <= 0.7 whole process and CPU at 10k, peak RSS <= its + 10 MB;\n"
        "reconcile/checker wall <= 1.3 and CPU <= 1.5 at 100k on PostgreSQL; sliced/reconcile <= 1.1;\n"
        "reconcile peak RSS flat from 10k to 1M (<= 1.1x); reconcile/baseline within 1.1 after a restructuring"
    )


if __name__ == "__main__":
    main()
