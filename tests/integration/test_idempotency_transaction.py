"""An app's writes through ``idempotent_transaction`` commit with its key's stored response, or not
at all, on SQLite and PostgreSQL: a repeat replays without writing, an exception, a 5xx or a lost
lease rolls the writes back, a request without a key gets a plain transaction (settled when its
response starts). The app is served over loopback (tests/idempotency_app.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select

from reconciler.idempotency import TransactionError, idempotent_transaction
from reconciler.storage.models import IDEMPOTENCY_KEYS
from tests.conftest import RunningServer
from tests.idempotency_app import balance, drop_balances, make_app, reset_balances

Serve = Callable[..., str]


@pytest.fixture
def api(engine: Engine, serve: Callable[[Any], RunningServer]) -> Iterator[Serve]:
    reset_balances(engine, a=0)

    def start(**options: Any) -> str:
        return serve(make_app(engine, **options)).url

    yield start
    drop_balances(engine)


def add(url: str, key: str | None, cents: int = 100, **body: Any) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    return httpx.post(
        f"{url}/add", json={"account": "a", "cents": cents, **body}, headers=headers, timeout=30
    )


def keys(engine: Engine) -> list[tuple[str, str, str | None]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                IDEMPOTENCY_KEYS.c.key, IDEMPOTENCY_KEYS.c.status, IDEMPOTENCY_KEYS.c.lease_owner
            )
        ).all()
    return [tuple(r) for r in rows]


def test_the_writes_and_the_stored_response_commit_together(api: Serve, engine: Engine) -> None:
    url = api()
    first = add(url, "k1")
    again = add(url, "k1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert first.json() == again.json() == {"balance": 100, "key": "k1"}
    assert again.headers["idempotent-replayed"] == "true"
    assert balance(engine, "a") == 100
    assert keys(engine) == [("k1", "completed", None)]
    # two runs at once inside one request queue on the connection instead of sharing it
    assert add(url, "k2", then="twice").status_code == 201
    assert balance(engine, "a") == 202


def test_a_sync_endpoint_writes_through_the_connection(api: Serve, engine: Engine) -> None:
    url = api()
    params = {"account": "a", "cents": "5"}
    for _ in range(2):
        answer = httpx.post(f"{url}/sync-add", params=params, headers={"Idempotency-Key": "s"})
        assert answer.status_code == 200 and answer.json() == {"balance": 5, "key": "s"}
    assert balance(engine, "a") == 5
    # an async endpoint may not block the event loop on it
    misuse = httpx.post(f"{url}/misuse", headers={"Idempotency-Key": "m"})
    assert misuse.status_code == 500 and balance(engine, "a") == 5


def test_an_exception_rolls_the_writes_back_and_releases_the_key(
    api: Serve, engine: Engine
) -> None:
    url = api()
    assert add(url, "boom", then="raise").status_code == 500
    assert balance(engine, "a") == 0 and keys(engine) == []
    assert add(url, "boom", then="raise").status_code == 500  # ran again, rolled back again
    assert balance(engine, "a") == 0


@pytest.mark.parametrize("status", [503, 429])
def test_an_answer_asking_for_a_retry_rolls_the_writes_back(
    api: Serve, engine: Engine, status: int
) -> None:
    url = api()
    assert add(url, "busy", status=status).status_code == status
    assert balance(engine, "a") == 0 and keys(engine) == []
    assert add(url, "busy", status=status).status_code == status  # not replayed: ran again
    assert balance(engine, "a") == 0


def test_a_lost_lease_rolls_the_writes_back_and_answers_409(
    api: Serve, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    url = api()
    lost = add(url, "stolen", then="steal")
    assert lost.status_code == 409 and lost.headers["content-type"] == "application/problem+json"
    assert "being processed by another attempt" in lost.json()["detail"]
    assert balance(engine, "a") == 0
    assert keys(engine) == [("stolen", "in_progress", "someone-else")]  # the other's, untouched
    assert any("writes were rolled back" in r.getMessage() for r in caplog.records)


def test_a_request_without_a_key_gets_a_plain_transaction(api: Serve, engine: Engine) -> None:
    url = api()
    assert add(url, None).status_code == 201
    assert add(url, None).status_code == 201  # nothing remembered: both ran
    assert balance(engine, "a") == 200
    assert add(url, None, status=503).status_code == 503  # rolled back, as with a key
    assert add(url, None, then="raise").status_code == 500
    assert balance(engine, "a") == 200
    # a method the middleware does not guard: the same plain transaction
    get = httpx.get(f"{url}/sync-add", params={"account": "a", "cents": "1"})
    assert get.json() == {"balance": 201, "key": None} and balance(engine, "a") == 201
    assert keys(engine) == []


def test_a_renewal_waiting_for_the_transaction_does_not_hold_up_its_commit(
    api: Serve, engine: Engine
) -> None:
    """The transaction is open across several renewals (on SQLite they wait for its write lock);
    it commits when the app is done, not after the renewal gives up."""
    url = api(lease_seconds=0.3)
    started = time.monotonic()
    assert add(url, "slow", then="sleep", seconds=0.5).status_code == 201
    assert time.monotonic() - started < 5
    assert balance(engine, "a") == 100 and keys(engine) == [("slow", "completed", None)]


def test_a_response_too_large_to_keep_commits_as_it_starts(api: Serve, engine: Engine) -> None:
    url = api(max_response_bytes=10)
    assert add(url, "big").status_code == 201
    assert add(url, "big").status_code == 201  # not kept: the retry runs again
    assert balance(engine, "a") == 200
    deadline = time.monotonic() + 5  # the key is released after the response went out
    while keys(engine) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert keys(engine) == []


def test_no_middleware_no_transaction() -> None:
    from starlette.requests import Request

    request = Request({"type": "http", "method": "POST", "path": "/", "headers": []})
    with pytest.raises(TransactionError, match="IdempotencyMiddleware did not see it"):
        idempotent_transaction(request)
