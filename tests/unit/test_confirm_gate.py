"""The confirmation gate's rules with a fake provider and a fake clock (no I/O): one call per key
per window, shared flights, refusals remembered, a bounded queue."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from connectors.errors import RejectedDelivery
from connectors.parsing import BadPayload
from connectors.webhooks import WebhookRequest
from reconciler.inbox.confirming import ConfirmGate, QueueFull


def request(key: str) -> WebhookRequest:
    return WebhookRequest(
        method="GET",
        url="http://x/webhooks/gopay",
        headers={},
        body=b"",
        now=0.0,
        query=(("id", key),),
    )


def key_of(req: WebhookRequest) -> str:
    key = req.query_value("id") or ""
    if not key.isascii() or not key.isdigit():
        raise BadPayload(f"not an id: {key!r}")
    return key


class Provider:
    """Knows the ids in ``known``; counts the calls; ``release`` holds every call until set."""

    def __init__(self, known: set[str]) -> None:
        self.known, self.calls = known, []
        self.release = threading.Event()
        self.release.set()

    def confirm(self, req: WebhookRequest) -> Any:
        self.release.wait(5)
        key = key_of(req)
        self.calls.append(key)
        if key == "500":
            raise RuntimeError("a bug, not an answer")
        if key == "503":
            raise RejectedDelivery(503, "the provider's API failed")
        if key not in self.known:
            raise RejectedDelivery(400, f"unknown {key}")
        return ("verdict", key)


def gate(provider: Provider, now: list[float], **kw: Any) -> ConfirmGate:
    settings: dict[str, Any] = {"queue": 4, "concurrency": 2, "window_seconds": 10.0, **kw}
    return ConfirmGate("gopay", key_of, provider.confirm, clock=lambda: now[0], **settings)


def ask(g: ConfirmGate, key: str) -> Any:
    return asyncio.run(g.ask(request(key)))


def test_a_malformed_key_is_refused_without_a_call() -> None:
    provider, now = Provider({"1"}), [0.0]
    with pytest.raises(BadPayload):
        ask(gate(provider, now), "1a")
    assert provider.calls == []


def test_an_unknown_key_is_refused_from_memory_until_the_window_ends() -> None:
    provider, now = Provider(set()), [0.0]
    g = gate(provider, now)
    for at in (0.0, 5.0, 9.9):
        now[0] = at
        with pytest.raises(RejectedDelivery) as refused:
            ask(g, "7")
        assert refused.value.status_code == 400
    assert provider.calls == ["7"]
    assert "from memory" in refused.value.reason
    now[0] = 10.0
    with pytest.raises(RejectedDelivery):
        ask(g, "7")
    assert provider.calls == ["7", "7"]


def test_a_confirmed_key_asked_again_within_the_window_is_503_with_the_time_left() -> None:
    provider, now = Provider({"1"}), [100.0]
    g = gate(provider, now)
    assert ask(g, "1") == ("verdict", "1")
    now[0] = 103.5
    with pytest.raises(RejectedDelivery) as again:
        ask(g, "1")
    assert (again.value.status_code, again.value.retry_after) == (503, 7)
    now[0] = 110.0
    assert ask(g, "1") == ("verdict", "1")
    assert provider.calls == ["1", "1"]


def test_the_providers_api_failing_is_remembered_as_a_503_with_retry_after() -> None:
    provider, now = Provider(set()), [0.0]
    g = gate(provider, now)
    for _ in range(3):
        with pytest.raises(RejectedDelivery) as failed:
            ask(g, "503")
    assert failed.value.status_code == 503 and failed.value.retry_after == 10
    assert provider.calls == ["503"]


def test_a_fault_of_hookledgers_own_is_not_remembered() -> None:
    provider, now = Provider(set()), [0.0]
    g = gate(provider, now)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            ask(g, "500")
    assert provider.calls == ["500", "500"]


def test_a_window_of_zero_asks_every_time() -> None:
    provider, now = Provider({"1"}), [0.0]
    g = gate(provider, now, window_seconds=0.0)
    for _ in range(3):
        assert ask(g, "1") == ("verdict", "1")
    assert provider.calls == ["1", "1", "1"]


def test_requests_for_one_key_while_it_is_asked_share_the_call() -> None:
    provider, now = Provider({"1"}), [0.0]
    provider.release.clear()
    g = gate(provider, now)

    async def together() -> list[Any]:
        waiting = [asyncio.create_task(g.ask(request("1"))) for _ in range(5)]
        await asyncio.sleep(0.05)
        provider.release.set()
        return await asyncio.gather(*waiting)

    assert asyncio.run(together()) == [("verdict", "1")] * 5
    assert provider.calls == ["1"]


def test_the_queue_is_bounded_and_frees_its_places() -> None:
    g = gate(Provider(set()), [0.0], queue=2)
    with g.place(), g.place():
        assert g.waiting == 2
        with pytest.raises(QueueFull), g.place():
            pass
    assert g.waiting == 0
    with g.place():
        assert g.waiting == 1
