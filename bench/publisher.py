"""Outbox publisher throughput: messages per second to a receiver over loopback, against a bare
loop in the same run.

The bare loop is the floor of the same durable work with no framework: the pending messages read
once, then for each one the same signed POST (the same headers, an HTTP client a thread as the
publisher has) and one raw-driver transaction that marks it sent, split over the same number of
threads. The publisher adds
what makes it safe to run several and to kill: a leased claim per message (its own transaction), the
attempt's row, the outcome guarded by the lease. The receiver is a separate process (it answers 202)
so that it does not share the benchmark's interpreter. Arms alternate over the rounds on fresh
copies of the same messages; medians and ranges are reported.

    python bench/publisher.py [--messages 3000] [--rounds 3] [--concurrency 4] [--latency-ms 0]
                              [--no-postgres]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine, func, select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import PYTHON, free_port, median, pg_schema, pinned, process, sqlite_db
from reconciler.config import parse_settings
from reconciler.outbox import add_message
from reconciler.outbox.publisher import make_client, publishers, resolve_auth
from reconciler.outbox.request import request_headers
from reconciler.outgoing import post
from reconciler.storage.engine import make_engine
from reconciler.storage.models import OUTBOX, OUTBOX_ATTEMPTS, OUTBOX_SNAPSHOTS

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def load(engine: Engine, n: int) -> None:
    with engine.begin() as conn:
        for table in (OUTBOX_ATTEMPTS, OUTBOX_SNAPSHOTS, OUTBOX):
            conn.execute(table.delete())
    for start in range(0, n, 1000):
        with engine.begin() as conn:
            for i in range(start, min(n, start + 1000)):
                add_message(
                    conn, "crm", {"order": i, "status": "shipped", "lines": [1, 2, 3]}, key=f"k{i}"
                )


def sent(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(OUTBOX).where(OUTBOX.c.status == "sent")
            ).scalar_one()
        )


def _threads(targets: list[threading.Thread]) -> float:
    t = time.perf_counter()
    for th in targets:
        th.start()
    for th in targets:
        th.join()
    return time.perf_counter() - t


def publisher_arm(engine: Engine, settings: object, n: int, concurrency: int) -> float:
    load(engine, n)
    loops = publishers(engine, settings, concurrency)  # type: ignore[arg-type]
    elapsed = _threads([threading.Thread(target=p.drain) for p in loops])
    for p in loops:
        p.close()
    assert sent(engine) == n
    return n / elapsed


def bare_arm(engine: Engine, settings: object, url: str, n: int, concurrency: int) -> float:
    load(engine, n)
    auth = resolve_auth(settings.outbox.targets[0])  # type: ignore[attr-defined]
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                OUTBOX.c.id,
                OUTBOX.c.key,
                OUTBOX.c.payload,
                OUTBOX.c.content_type,
                OUTBOX.c.correlation_id,
            ).order_by(OUTBOX.c.id)
        ).all()
    sqlite = engine.dialect.name == "sqlite"
    mark = "?" if sqlite else "%s"

    def work(part: list[tuple[int, str, bytes, str, str]], client: object) -> None:
        raw = engine.raw_connection()
        cur = raw.cursor()
        for message_id, key, payload, content_type, correlation_id in part:
            headers = request_headers(
                key=key,
                correlation_id=correlation_id,
                content_type=content_type,
                headers={},
                body=payload,
                attempt=1,
                auth=auth,
                timestamp=int(time.time()),
            )
            answer = post(client, url, payload, headers, timeout=10.0)  # type: ignore[arg-type]
            assert answer.ok, answer
            now = datetime.now(UTC)
            stamp = now.strftime("%Y-%m-%d %H:%M:%S.%f") if sqlite else now
            if sqlite:
                cur.execute("BEGIN IMMEDIATE")
            cur.execute(
                f"UPDATE outbox SET status='sent', attempts=1, sent_at={mark} WHERE id={mark}",
                (stamp, message_id),
            )
            cur.execute("COMMIT") if sqlite else raw.commit()
        raw.close()

    parts = [list(rows[i::concurrency]) for i in range(concurrency)]
    clients = [make_client() for _ in parts]  # a client a thread, as the publisher has
    elapsed = _threads(
        [threading.Thread(target=work, args=a) for a in zip(parts, clients, strict=True)]
    )
    for client in clients:
        client.close()
    assert sent(engine) == n
    return n / elapsed


RECEIVER = """
import asyncio, sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

async def receive(request):
    await request.body()
    await asyncio.sleep(float(sys.argv[2]) / 1000)  # a real target's latency
    return JSONResponse({"status": "queued"}, 202)

async def health(request):
    return JSONResponse({})

app = Starlette(routes=[Route("/in", receive, methods=["POST"]), Route("/", health)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="the receiver's answer time (default 0)"
    )
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    import os

    os.environ["BENCH_OUTBOX_SECRET"] = SECRET
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "receiver.py"
        script.write_text(RECEIVER)
        argv = pinned(1, [PYTHON, str(script), str(port), str(args.latency_ms)])
        with process(argv, f"http://127.0.0.1:{port}/"):
            url = f"http://127.0.0.1:{port}/in"
            dbs = {"sqlite": sqlite_db(Path(tmp), "outbox.db")}
            if not args.no_postgres:
                dbs["postgresql"] = pg_schema()
            for name, ctx in dbs.items():
                db_url = ctx.__enter__()
                engine = make_engine(db_url)
                settings = parse_settings(
                    {
                        "database": {"url": db_url},
                        "outbox": {
                            "concurrency": args.concurrency,
                            "targets": [
                                {
                                    "name": "crm",
                                    "url": url,
                                    "signing_secret_env": "BENCH_OUTBOX_SECRET",
                                }
                            ],
                        },
                    },
                    "<bench>",
                )
                try:
                    pub, bare = [], []
                    for r in range(args.rounds):
                        bare.append(
                            bare_arm(engine, settings, url, args.messages, args.concurrency)
                        )
                        pub.append(publisher_arm(engine, settings, args.messages, args.concurrency))
                        print(
                            f"{name} round {r + 1}: bare {bare[-1]:.0f}/s, publisher {pub[-1]:.0f}/s",
                            flush=True,
                        )
                    ratios = sorted(p / b for p, b in zip(pub, bare, strict=True))
                    print(
                        f"{name}: publisher {median(pub):.0f} messages/s "
                        f"({min(pub):.0f}-{max(pub):.0f}), bare loop {median(bare):.0f}/s "
                        f"({min(bare):.0f}-{max(bare):.0f}), ratio {median(ratios):.2f} "
                        f"({ratios[0]:.2f}-{ratios[-1]:.2f})\n",
                        flush=True,
                    )
                finally:
                    engine.dispose()
                    ctx.__exit__(None, None, None)


if __name__ == "__main__":
    main()
