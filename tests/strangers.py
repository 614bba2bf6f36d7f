"""Strangers flooding a receiver's GoPay endpoint, run in a process of their own (the receiver's
interpreter is not theirs to share). A module of its own so that the spawned process imports only
httpx, and starts flooding in well under a second on a loaded machine."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from typing import Any

import httpx


def flood(url: str, first_id: int, in_flight: int, seconds: float, ready: Any, out: Any) -> None:
    """``in_flight`` strangers for ``seconds``, each sending a GET with a fresh well-formed id as
    soon as its last was answered. Sets ``ready`` once the first GETs are out, then puts what they
    were answered (by status and whether a 503 said Retry-After; a transport error by its class
    name) and how many ids were used. Always puts, so the test reads an answer, never a silence."""

    async def run() -> tuple[Counter[Any], int]:
        answers: Counter[Any] = Counter()
        ids = itertools.count(first_id)
        # A fresh connection for each GET, as strangers' scripts open them: a kept-alive one can be
        # closed by the server's keep-alive timeout while this starved process has not yet reused it.
        limits = httpx.Limits(max_connections=in_flight + 10, max_keepalive_connections=0)
        deadline = time.monotonic() + seconds

        async def stranger(client: httpx.AsyncClient) -> None:
            while time.monotonic() < deadline:
                try:
                    got = await client.get(f"{url}/webhooks/gopay", params={"id": str(next(ids))})
                except httpx.HTTPError as error:
                    answers[f"{type(error).__name__}: {error}", False] += 1
                    continue
                answers[got.status_code, "retry-after" in got.headers] += 1

        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            strangers = [asyncio.ensure_future(stranger(client)) for _ in range(in_flight)]
            await asyncio.sleep(0)
            ready.set()
            await asyncio.gather(*strangers)
        return answers, next(ids) - first_id

    try:
        out.put(asyncio.run(run()))
    except BaseException as error:
        out.put((Counter({(f"the flood failed: {error!r}", False): 1}), 0))
        raise
