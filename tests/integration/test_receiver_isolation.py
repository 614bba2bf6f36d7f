"""No request harms another: hostile deliveries never fail valid ones in the same group commit.

Over real loopback HTTP (uvicorn), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import string
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from connectors.parsing import ParsedEvent
from reconciler.inbox.committer import GroupCommitter
from reconciler.inbox.limiter import PerClientLimiter
from reconciler.inbox.receiver import create_app
from reconciler.inbox.store import IncomingEvent, Stored
from reconciler.logs import _FieldsFormatter
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS, DeliveryOutcome
from tests.conftest import make_settings
from tests.deliveries import github_delivery, stripe_delivery


@pytest.fixture
def receiver(db_url: str, engine: Engine, serve: Any) -> str:
    return str(serve(create_app(make_settings(db_url), engine)).url)


def _hostile() -> list[tuple[str, dict[str, str], bytes, int]]:
    """(path, headers, body, expected status) for requests that must fail alone."""
    out: list[tuple[str, dict[str, str], bytes, int]] = [("/webhooks/%00", {}, b"{}", 404)]
    headers, body = github_delivery(event="x" * 300)
    out.append(("/webhooks/github", headers, body, 400))
    headers, body = stripe_delivery()
    out.append(("/webhooks/stripe", {**headers, "Content-Type": "a/" + "b" * 300}, body, 400))
    headers, body = stripe_delivery("evt_\x00nul")
    out.append(("/webhooks/stripe", headers, body, 400))
    headers, body = stripe_delivery(event_type="t" * 300)
    out.append(("/webhooks/stripe", headers, body, 400))
    return out


def test_valid_deliveries_survive_a_stream_of_hostile_ones(receiver: str, engine: Engine) -> None:
    valid = [stripe_delivery(f"evt_ok_{i}") for i in range(300)]
    hostile = _hostile()

    async def run() -> tuple[list[int], list[tuple[int, int]]]:
        limits = httpx.Limits(max_connections=60)
        async with httpx.AsyncClient(base_url=receiver, limits=limits, timeout=30) as client:
            stop = asyncio.Event()

            async def attack() -> list[tuple[int, int]]:
                seen = []
                while not stop.is_set():
                    for path, headers, body, expected in hostile:
                        r = await client.post(path, content=body, headers=headers)
                        seen.append((r.status_code, expected))
                return seen

            attackers = [asyncio.create_task(attack()) for _ in range(4)]
            gate = asyncio.Semaphore(50)

            async def send(headers: dict[str, str], body: bytes) -> int:
                async with gate:
                    r = await client.post("/webhooks/stripe", content=body, headers=headers)
                    return r.status_code

            statuses = await asyncio.gather(*(send(h, b) for h, b in valid))
            stop.set()
            attacks = [pair for task in attackers for pair in await task]
            return list(statuses), attacks

    t = time.perf_counter()
    statuses, attacks = asyncio.run(run())
    print(f"figures: 300 valid, {len(attacks)} hostile, {time.perf_counter() - t:.1f} s")
    assert statuses.count(200) == 300, sorted(set(statuses))
    assert attacks and all(got == expected for got, expected in attacks), attacks[:10]
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one()
        reasons = conn.execute(
            select(DELIVERIES.c.source, DELIVERIES.c.reason).where(
                DELIVERIES.c.outcome == DeliveryOutcome.REJECTED
            )
        ).all()
    assert stored == 300
    assert {s for s, _ in reasons} >= {"\\x00", "github", "stripe"}
    messages = {r for _, r in reasons}
    assert "header Content-Type is longer than 255 characters" in messages
    assert any(m.startswith("event id 'evt_\\x00nul' contains a NUL byte") for m in messages)
    assert any(m.startswith("event type 'xxx") for m in messages)


def _event(event_id: Any) -> IncomingEvent:
    return IncomingEvent(
        source="stripe",
        parsed=ParsedEvent(event_id=event_id),
        body=b"{}",
        headers={},
        received_at=datetime.now(UTC),
    )


def test_a_batch_the_database_refuses_is_retried_item_by_item(engine: Engine) -> None:
    """Defence in depth: an item that slipped past validation fails alone."""
    committer = GroupCommitter(engine, max_batch=50)

    async def run() -> list[Any]:
        await committer.start()
        try:
            items = [_event(f"evt_{i}") for i in range(20)]
            items.insert(7, _event(None))  # NOT NULL: refused by both databases
            return await asyncio.gather(
                *(committer.submit(item) for item in items), return_exceptions=True
            )
        finally:
            await committer.stop()

    results = asyncio.run(run())
    failures = [r for r in results if isinstance(r, BaseException)]
    assert len(failures) == 1 and results.index(failures[0]) == 7
    assert results.count(Stored(DeliveryOutcome.ACCEPTED)) == 20
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one() == 20


def test_a_providers_batch_is_stored_whole_or_not_at_all_beside_its_neighbours(
    engine: Engine,
) -> None:
    """A delivery's items (an Adyen batch) share its fate when the database refuses one of them;
    the other deliveries in the same group commit are stored."""
    committer = GroupCommitter(engine, max_batch=50)

    async def run() -> list[Any]:
        await committer.start()
        try:
            whole = [_event("evt_b1"), _event("evt_b2")]
            broken = [_event("evt_c1"), _event(None), _event("evt_c3")]
            singles = [_event(f"evt_{i}") for i in range(5)]
            return await asyncio.gather(
                committer.submit_all(whole),
                committer.submit_all(broken),
                *(committer.submit(item) for item in singles),
                return_exceptions=True,
            )
        finally:
            await committer.stop()

    results = asyncio.run(run())
    assert results[0] == [Stored(DeliveryOutcome.ACCEPTED)] * 2
    assert isinstance(results[1], BaseException)
    assert results[2:] == [Stored(DeliveryOutcome.ACCEPTED)] * 5
    with engine.connect() as conn:
        ids = set(conn.execute(select(INBOX_EVENTS.c.event_id)).scalars())
    assert ids == {"evt_b1", "evt_b2", *(f"evt_{i}" for i in range(5))}  # no evt_c1, no evt_c3


def _metric(text: str, name: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith(name):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def test_strangers_do_not_grow_metrics_or_the_deliveries_table(
    db_url: str, engine: Engine, serve: Any
) -> None:
    settings = make_settings(db_url, receiver={"unknown_source_log_per_minute": 5})
    url = str(serve(create_app(settings, engine)).url)
    with httpx.Client(base_url=url) as client:
        for i in range(40):
            name = "".join(random.Random(i).choices(string.ascii_lowercase, k=8))
            assert client.post(f"/webhooks/{name}", content=b"{}").status_code == 404
        assert client.post("/webhooks/forged%0aINFO%20admin", content=b"{}").status_code == 404
        metrics = client.get("/metrics").text
    deliveries = _metric(metrics, "hookledger_deliveries_total")
    assert deliveries == {'hookledger_deliveries_total{outcome="rejected",source="_unknown"}': 41}
    unlogged = _metric(metrics, "hookledger_rejected_deliveries_not_logged_total")
    assert list(unlogged.values()) == [36]
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(DELIVERIES)).scalar_one() == 5


def test_log_lines_escape_stranger_chosen_values() -> None:
    formatter = _FieldsFormatter("%(levelname)s %(message)s")
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "got %s", ("a\nINFO b",), None)
    record.source = "forged\nINFO admin logged in"
    line = formatter.format(record)
    assert "\n" not in line
    assert line == "INFO got a\\x0aINFO b source=forged\\x0aINFO admin logged in"


def test_a_card_number_in_the_url_path_is_masked_in_the_log_line(
    receiver: str, caplog: pytest.LogCaptureFixture
) -> None:
    from reconciler.logs import _json_formatter

    caplog.set_level(logging.INFO, logger="reconciler.inbox")
    with httpx.Client(base_url=receiver) as client:
        for path in ("4111111111111111", "4111-1111-1111-1111", "4111.1111.1111.1111"):
            assert client.post(f"/webhooks/{path}", content=b"{}").status_code == 404
    rejected = [r for r in caplog.records if r.getMessage() == "delivery rejected"]
    assert len(rejected) == 3
    text, as_json = _FieldsFormatter("%(message)s"), _json_formatter()
    for r in rejected:
        for line in (text.format(r), as_json.format(r)):
            assert "1111" not in line and "<masked>" in line, line


def test_limiter_allows_per_client_per_minute_and_bounds_its_table() -> None:
    limiter = PerClientLimiter(2, max_clients=3)
    assert [limiter.allow("a", 0.0) for _ in range(3)] == [True, True, False]
    assert limiter.allow("b", 1.0) and limiter.allow("c", 1.0)
    assert not limiter.allow("d", 2.0)  # the table is full until the window turns
    assert limiter.dropped == 2
    assert limiter.allow("d", 61.0) and limiter.dropped == 0


# --- fuzzing: no input answers >= 500 -----------------------------------------------------------

_SIGNATURE_HEADERS = [
    "Stripe-Signature",
    "X-Hub-Signature-256",
    "X-Shopify-Hmac-Sha256",
    "webhook-signature",
    "webhook-id",
    "webhook-timestamp",
    "X-Acme-Signature",
    "X-GitHub-Delivery",
    "X-GitHub-Event",
    "X-Shopify-Webhook-Id",
    "X-Shopify-Topic",
    "Content-Type",
]
# What a client can put on the wire in a header value: visible bytes, space, tab and Latin-1.
_header_value = st.binary(max_size=80).map(
    lambda raw: bytes(b for b in raw if b >= 0x20 and b != 0x7F).strip(b" ") or b"x"
)
_prefixes = st.sampled_from(["", "t=1,v1=", "sha256=", "v1,", "v1=", "t=", "sha256="])
_signature_like = st.tuples(_prefixes, _header_value).map(lambda p: p[0].encode() + p[1])
_bodies = st.one_of(
    st.binary(max_size=300),
    st.builds(
        lambda i, t: json.dumps({"id": i, "type": t, "meta": {"id": i}}).encode(),
        st.text(max_size=300),
        st.text(max_size=40),
    ),
)
_paths = st.one_of(
    st.sampled_from(["stripe", "github", "shopify", "svix", "acme"]),
    # any text, percent-encoded: the receiver sees NULs, newlines and non-ASCII in the name
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=70).map(
        lambda s: quote(s, safe="")
    ),
)


def test_signature_headers_with_any_bytes_answer_401_never_500(receiver: str) -> None:
    with httpx.Client(base_url=receiver) as client:
        for path, header in [
            ("stripe", {"Stripe-Signature": "t=1,v1=\xe9".encode("latin-1")}),
            ("github", {"X-Hub-Signature-256": "sha256=\xe9".encode("latin-1")}),
            ("shopify", {"X-Shopify-Hmac-Sha256": "\xe9".encode("latin-1")}),
            ("acme", {"X-Acme-Signature": "sha256=\xe9".encode("latin-1")}),
        ]:
            r = client.post(f"/webhooks/{path}", content=b"{}", headers=header)
            assert r.status_code == 401, (path, r.text)
        h = {"webhook-id": "m", "webhook-timestamp": "1", "webhook-signature": b"v1,\xe9"}
        assert client.post("/webhooks/svix", content=b"{}", headers=h).status_code == 401


@pytest.mark.slow
def test_fuzzed_deliveries_never_answer_5xx_nor_store(receiver: str, engine: Engine) -> None:
    answered: list[int] = []
    client = httpx.Client(base_url=receiver, timeout=10)

    @settings(
        max_examples=350,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        path=_paths,
        headers=st.dictionaries(
            st.sampled_from(_SIGNATURE_HEADERS),
            st.one_of(_signature_like, _header_value),
            max_size=6,
        ),
        body=_bodies,
    )
    def fuzz(path: str, headers: dict[str, bytes], body: bytes) -> None:
        # Each example goes to every configured source, then to the fuzzed path.
        for target in ["stripe", "github", "shopify", "svix", "acme", path]:
            r = client.post(f"/webhooks/{target}", content=body, headers=headers)
            answered.append(r.status_code)
            assert r.status_code < 500, (target, headers, body, r.text)

    t = time.perf_counter()
    try:
        fuzz()
        assert client.get("/healthz").status_code == 200
    finally:
        client.close()
    elapsed = time.perf_counter() - t
    print(
        f"figures: {len(answered)} fuzzed requests in {elapsed:.1f} s, max status {max(answered)}"
    )
    assert elapsed < 60
    assert len(answered) >= 2000
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one() == 0


_NEW_KINDS = {
    "slack": {"kind": "slack", "signing_secret_env": "T_GENERIC_SECRET"},
    "twilio": {"kind": "twilio", "signing_secret_env": "T_GENERIC_SECRET"},
    "adyen": {"kind": "adyen", "signing_secret_env": "T_ADYEN_KEY"},
    "discord": {
        "kind": "discord",
        "public_key": "ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c",
    },
}
_NEW_HEADERS = [
    "X-Slack-Signature",
    "X-Slack-Request-Timestamp",
    "X-Twilio-Signature",
    "X-Twilio-Webhooks-Signature-Settings",
    "X-Signature-Ed25519",
    "X-Signature-Timestamp",
    "Content-Type",
]
_new_bodies = st.one_of(
    _bodies,
    st.just(b"payload=%7B%22type%22%3A1%7D"),
    st.builds(
        lambda psp: json.dumps(
            {"notificationItems": [{"NotificationRequestItem": {"pspReference": psp}}]}
        ).encode(),
        st.text(max_size=20),
    ),
)


def test_fuzzed_deliveries_to_the_new_kinds_never_answer_5xx_nor_store(
    db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35's input paths (Slack, Twilio, Adyen, Discord; form bodies, batches, their headers):
    any request is a 4xx with a reason, and nothing unsigned is stored."""
    monkeypatch.setenv(
        "T_ADYEN_KEY", "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA000"
    )
    config = make_settings(
        db_url, sources=[{"name": name, **values} for name, values in _NEW_KINDS.items()]
    )
    client = httpx.Client(base_url=str(serve(create_app(config, engine)).url), timeout=10)

    @settings(
        max_examples=100,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        headers=st.dictionaries(
            st.sampled_from(_NEW_HEADERS),
            st.one_of(
                _signature_like,
                _header_value,
                st.sampled_from([b"application/x-www-form-urlencoded", b"application/json"]),
            ),
            max_size=5,
        ),
        body=_new_bodies,
    )
    def fuzz(headers: dict[str, bytes], body: bytes) -> None:
        for target in _NEW_KINDS:
            r = client.post(f"/webhooks/{target}", content=body, headers=headers)
            assert 400 <= r.status_code < 500, (target, headers, body, r.text)
            assert r.json()["reason"]

    try:
        fuzz()
    finally:
        client.close()
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one() == 0
