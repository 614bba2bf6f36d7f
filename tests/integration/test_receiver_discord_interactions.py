"""A Discord interactions source over real loopback HTTP, on SQLite and PostgreSQL: the PING answered
PONG and not stored; a command stored once and answered DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE within
Discord's 3 seconds, its resend answered alike and stored no second time; a forged signature 401.
Fuzzed requests never answer 5xx, and only a verified interaction is ever stored."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey
from sqlalchemy import Engine, select

from reconciler.inbox.receiver import create_app
from reconciler.storage.models import INBOX_EVENTS
from tests.conftest import make_settings
from tests.integration.test_receiver_discord import PUBLIC, SEED, post, rows

COMMAND = json.loads(
    (
        Path(__file__).parents[1]
        / "fixtures/providers/discord_interactions/application_command.json"
    ).read_text()
)
PING = {"application_id": "1234560123453231555", "id": "1313585829357699001", "type": 1}


@pytest.fixture
def interactions(db_url: str, engine: Engine, serve: Any) -> str:
    settings = make_settings(
        db_url, sources=[{"name": "bot", "kind": "discord_interactions", "public_key": PUBLIC}]
    )
    return f"{serve(create_app(settings, engine)).url}/webhooks/bot"


def test_ping_command_resend_and_forgery(interactions: str, engine: Engine) -> None:
    forged_ping = post(interactions, PING, seed=bytes([8]) * 32)  # Discord's deliberate check
    assert forged_ping.status_code == 401
    ping = post(interactions, PING)
    assert ping.status_code == 200 and ping.json() == {"type": 1}
    assert ping.headers["content-type"] == "application/json"
    started = time.perf_counter()
    first = post(interactions, COMMAND)
    assert time.perf_counter() - started < 3  # Discord's deadline for the initial response
    assert first.status_code == 200 and first.json() == {"type": 5}
    again = post(interactions, COMMAND)  # signed afresh, the same interaction
    assert again.status_code == 200 and again.json() == {"type": 5}
    assert post(interactions, COMMAND, seed=bytes([8]) * 32).status_code == 401
    events, deliveries = rows(engine)
    assert events == ["APPLICATION_COMMAND"]
    assert deliveries == [
        ("rejected", 401),
        ("handshake", 200),
        ("accepted", 200),
        ("duplicate", 200),
        ("rejected", 401),
    ]
    with engine.connect() as conn:
        stored = conn.execute(select(INBOX_EVENTS.c.event_id, INBOX_EVENTS.c.object_id)).all()
    assert [tuple(r) for r in stored] == [(COMMAND["id"], "refund")]


_SIGNING = st.sampled_from(["ours", "ours", "another key", "stale", "garbage"])
_SNOWFLAKE = st.from_regex(r"\A[1-9][0-9]{0,18}\Z")
_DOCUMENTS = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from([2, 3, 5]), "id": _SNOWFLAKE},
        optional={"data": st.fixed_dictionaries({}, optional={"name": st.text(max_size=8)})},
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from([1, 2, 3, 4, 5, 7, "2"]),
            "id": st.one_of(_SNOWFLAKE, st.text(max_size=5)),
            "data": st.fixed_dictionaries({}, optional={"name": st.text(max_size=8)}),
            "event": st.just({}),
        },
    ),
)


def test_fuzzed_requests_never_answer_5xx_and_only_verified_ones_are_stored(
    interactions: str, engine: Engine
) -> None:
    verified_ids: set[str] = set()
    client = httpx.Client(timeout=10)

    @settings(
        max_examples=60,
        deadline=None,
        database=None,
        derandomize=True,  # the same examples each run: the check below that some stored holds
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        document=_DOCUMENTS,
        raw=st.one_of(st.none(), st.none(), st.binary(max_size=40)),
        signing=_SIGNING,
        extra=st.dictionaries(
            st.sampled_from(["X-Signature-Ed25519", "X-Signature-Timestamp", "Content-Type"]),
            st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=20),
            max_size=2,
        ),
    )
    def fuzz(
        document: dict[str, Any], raw: bytes | None, signing: str, extra: dict[str, str]
    ) -> None:
        body = json.dumps(document).encode() if raw is None else raw
        stamp = int(time.time()) - (3600 if signing == "stale" else 0)
        headers: dict[str, str] = dict(extra) if signing == "garbage" else {}
        if signing in ("ours", "another key", "stale"):
            seed = bytes([8]) * 32 if signing == "another key" else SEED
            signature = SigningKey(seed).sign(str(stamp).encode() + body).signature.hex()
            headers.update({"X-Signature-Ed25519": signature, "X-Signature-Timestamp": str(stamp)})
        answer = client.post(interactions, content=body, headers=headers)
        assert answer.status_code < 500, (document, raw, signing, answer.text)
        if signing != "ours":
            assert answer.status_code == 401, (signing, answer.text)
        elif answer.status_code == 200 and answer.json()["type"] in (5, 6):
            verified_ids.add(document["id"])

    try:
        fuzz()
    finally:
        client.close()
    with engine.connect() as conn:
        stored = set(conn.execute(select(INBOX_EVENTS.c.event_id)).scalars())
    assert stored == verified_ids and verified_ids  # the fuzz stored some: not vacuous
