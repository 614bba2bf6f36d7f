"""The naive baseline: a Starlette endpoint written the plain way, without batching.

It checks the GitHub signature, decodes the body and stores the event and its delivery row with the
same two INSERTs the receiver makes (the event with ON CONFLICT DO NOTHING), one transaction and one
commit per request, on the event loop — what a competent hand-written webhook endpoint does. The
engine is a plain SQLAlchemy one (no pool pre-ping), SQLite with the same WAL settings as
hookledger's; statements are built once.

    python bench/naive_app.py PORT DATABASE_URL SECRET
"""

from __future__ import annotations

import hashlib
import hmac
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import orjson
import uvicorn
from sqlalchemy import create_engine, event, insert
from sqlalchemy.dialects import postgresql, sqlite
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reconciler.storage.models import DELIVERIES, INBOX_EVENTS

PORT, URL, SECRET = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()
engine = create_engine(URL)
if engine.dialect.name == "sqlite":

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: object, _record: object) -> None:
        cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=5000")
        cursor.close()

    dialect_insert = sqlite.insert
else:
    dialect_insert = postgresql.insert

STORE_EVENT = dialect_insert(INBOX_EVENTS).on_conflict_do_nothing(
    index_elements=["source", "event_id"]
)
STORE_DELIVERY = insert(DELIVERIES)


async def hook(request: Request) -> Response:
    body = await request.body()
    expected = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, request.headers.get("x-hub-signature-256", "")):
        return JSONResponse({"error": "bad signature"}, status_code=401)
    delivery = request.headers["x-github-delivery"]
    orjson.loads(body)  # a malformed body is refused before anything is stored
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(
            STORE_EVENT,
            {
                "source": "github",
                "event_id": delivery,
                "event_type": request.headers.get("x-github-event"),
                "body": body,
                "content_type": "application/json",
                "headers": {"x-github-event": request.headers.get("x-github-event")},
                "received_at": now,
                "origin": "webhook",
                "status": "pending",
                "attempts": 0,
                "next_attempt_at": now,
                "correlation_id": uuid.uuid4().hex,
                "fingerprint": hashlib.sha256(body).hexdigest(),
            },
        )
        conn.execute(
            STORE_DELIVERY,
            {
                "source": "github",
                "event_id": delivery,
                "delivery_id": delivery,
                "received_at": now,
                "outcome": "accepted",
                "status_code": 200,
                "remote_addr": request.client.host if request.client else None,
            },
        )
    return JSONResponse({"status": "accepted"})


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


app = Starlette(
    routes=[
        Route("/webhooks/{source}", hook, methods=["POST"]),
        Route("/healthz", health, methods=["GET"]),
    ]
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning", access_log=False)
