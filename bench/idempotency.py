"""What the Idempotency-Key middleware costs a request of the team's API, over loopback.

Arms against the same app (a JSON POST that answers 201), each served by uvicorn in a process of its
own, loaded by the same client with the same concurrency, interleaved over the rounds:

- ``bare``: the app without the middleware (what a request costs with no idempotency at all);
- ``floor``: the same endpoint doing the durable work by hand, as a competent application would:
  ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` of the key, the work, an ``UPDATE`` storing the
  response (two transactions, in the endpoint, no fingerprint, lease or waiting), and for a repeat
  one ``SELECT`` of the stored response;
- ``new keys`` / ``repeats``: the middleware, with a new key per request / the same keys again.

Requests per second, medians and ranges; the middleware's ratios are against ``floor`` (new keys
against its first pass, repeats against its second) in the same round.

    python bench/idempotency.py [--requests 2000] [--rounds 3] [--clients 8] [--no-postgres]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import PYTHON, free_port, median, pg_schema, pinned, process, sqlite_db

APP = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

async def create(request: Request):
    body = await request.json()
    return JSONResponse({"order": body["n"], "status": "created"}, 201)

async def health(request: Request):
    return JSONResponse({})

def by_hand(request: Request):  # a sync endpoint: Starlette runs it on its thread pool
    import asyncio, json
    from datetime import UTC, datetime, timedelta
    from sqlalchemy import text
    key = request.headers["idempotency-key"]
    now = datetime.now(UTC)
    with ENGINE.begin() as conn:
        new = conn.execute(
            text(
                "INSERT INTO idempotency_keys (owner, key, fingerprint, method, path, status, "
                "created_at, expires_at) VALUES ('o', :k, 'f', 'POST', '/orders', 'in_progress', "
                ":now, :exp) ON CONFLICT (owner, key) DO NOTHING RETURNING id"
            ),
            {"k": key, "now": STAMP(now), "exp": STAMP(now + timedelta(days=7))},
        ).first()
        if new is None:
            stored = conn.execute(
                text("SELECT response_body FROM idempotency_keys WHERE owner = 'o' AND key = :k"),
                {"k": key},
            ).scalar_one()
            return Response(stored, 201, media_type="application/json")
    body = json.dumps({"order": 1, "status": "created"}).encode()
    with ENGINE.begin() as conn:
        conn.execute(
            text(
                "UPDATE idempotency_keys SET status = 'completed', response_status = 201, "
                "response_body = :b WHERE owner = 'o' AND key = :k"
            ),
            {"b": body, "k": key},
        )
    return Response(body, 201, media_type="application/json")

middleware = []
routes = [Route("/orders", create, methods=["POST"]), Route("/", health)]
if sys.argv[2] == "floor":
    from reconciler.storage.engine import make_engine
    ENGINE = make_engine(sys.argv[3])
    sqlite = ENGINE.dialect.name == "sqlite"
    STAMP = (lambda t: t.replace(tzinfo=None).isoformat(sep=" ")) if sqlite else (lambda t: t)
    routes = [Route("/orders", by_hand, methods=["POST"]), Route("/", health)]
elif sys.argv[2] != "-":
    from reconciler.idempotency import IdempotencyMiddleware
    from reconciler.storage.engine import make_engine
    middleware = [Middleware(IdempotencyMiddleware, engine=make_engine(sys.argv[2]))]
app = Starlette(routes=routes, middleware=middleware)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


def load(url: str, keys: list[str], clients: int) -> float:
    """Requests per second of ``len(keys)`` POSTs (``""``: no key) from ``clients`` threads."""

    def work(part: list[str]) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            for key in part:
                headers = {"Idempotency-Key": key} if key else {}
                answer = client.post("/orders", json={"n": 1}, headers=headers)
                assert answer.status_code == 201, answer.text

    threads = [threading.Thread(target=work, args=(keys[i::clients],)) for i in range(clients)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return len(keys) / (time.perf_counter() - t)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "app.py"
        script.write_text(APP)
        dbs = {"sqlite": sqlite_db(Path(tmp), "keys.db")}
        if not args.no_postgres:
            dbs["postgresql"] = pg_schema()
        for name, ctx in dbs.items():
            db_url = ctx.__enter__()
            bare_port, guarded_port, floor_port = free_port(), free_port(), free_port()
            try:
                with (
                    process(
                        pinned(1, [PYTHON, str(script), str(bare_port), "-"]),
                        f"http://127.0.0.1:{bare_port}/",
                    ),
                    process(
                        pinned(1, [PYTHON, str(script), str(guarded_port), db_url]),
                        f"http://127.0.0.1:{guarded_port}/",
                    ),
                    process(
                        pinned(1, [PYTHON, str(script), str(floor_port), "floor", db_url]),
                        f"http://127.0.0.1:{floor_port}/",
                    ),
                ):
                    arms: dict[str, list[float]] = {
                        "bare": [],
                        "floor new": [],
                        "floor repeats": [],
                        "new keys": [],
                        "repeats": [],
                    }
                    for r in range(args.rounds):
                        bare = f"http://127.0.0.1:{bare_port}"
                        arms["bare"].append(load(bare, [""] * args.requests, args.clients))
                        for prefix, url in (
                            ("floor ", f"http://127.0.0.1:{floor_port}"),
                            ("", f"http://127.0.0.1:{guarded_port}"),
                        ):
                            keys = [uuid.uuid4().hex for _ in range(args.requests)]
                            first, again = ("new", "repeats") if prefix else ("new keys", "repeats")
                            arms[prefix + first].append(load(url, keys, args.clients))
                            arms[prefix + again].append(load(url, keys, args.clients))
                        print(
                            f"{name} round {r + 1}: "
                            + ", ".join(f"{arm} {v[-1]:.0f}/s" for arm, v in arms.items()),
                            flush=True,
                        )
                    for arm, floor in (("new keys", "floor new"), ("repeats", "floor repeats")):
                        ratios = sorted(a / b for a, b in zip(arms[arm], arms[floor], strict=True))
                        print(
                            f"{name}: {arm} {median(arms[arm]):.0f} requests/s "
                            f"({min(arms[arm]):.0f}-{max(arms[arm]):.0f}), by hand "
                            f"{median(arms[floor]):.0f}/s, ratio {median(ratios):.2f} "
                            f"({ratios[0]:.2f}-{ratios[-1]:.2f}); no idempotency at all "
                            f"{median(arms['bare']):.0f}/s",
                            flush=True,
                        )
                    print(flush=True)
            finally:
                ctx.__exit__(None, None, None)


if __name__ == "__main__":
    main()
