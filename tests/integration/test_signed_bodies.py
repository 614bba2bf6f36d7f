"""No signed delivery gets a 5xx while the database is up (issue 34): a body that verifies but that
the parser or the store cannot take is a 4xx with a ``reason``, logged as a ``rejected`` delivery,
and never makes a valid neighbour fail. Over real loopback HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select

from connectors.providers.github.signature import github_sign
from connectors.providers.standard.signature import standard_sign
from connectors.providers.stripe.signature import stripe_sign
from reconciler.inbox.receiver import create_app
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS
from tests.conftest import SECRETS, make_settings
from tests.deliveries import acme_sign, stripe_delivery


def _stripe(body: bytes) -> dict[str, str]:
    return {"Stripe-Signature": stripe_sign(body, SECRETS["stripe"], int(time.time()))}


def _github(body: bytes) -> dict[str, str]:
    return {
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": github_sign(body, SECRETS["github"]),
    }


def _standard(body: bytes) -> dict[str, str]:
    msg_id, ts = f"msg_{uuid.uuid4().hex}", int(time.time())
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": standard_sign(body, SECRETS["standard"], msg_id, ts),
    }


def _generic(body: bytes) -> dict[str, str]:
    return {"X-Acme-Signature": acme_sign(body, SECRETS["generic"])}


SIGNERS: dict[str, Callable[[bytes], dict[str, str]]] = {
    "stripe": _stripe,
    "github": _github,
    "svix": _standard,
    "acme": _generic,
}


def _nested(depth: int) -> bytes:
    return b'{"id":"evt_deep","type":"t","meta":{"id":"d","type":"t"},"x":' + (
        b"[" * depth + b"]" * depth + b"}"
    )


def _with(**fields: Any) -> bytes:
    """A Stripe-shaped event whose fields also serve the generic source (``meta.id``)."""
    doc = {"id": "evt_x", "object": "event", "type": "t", "created": 1, "meta": {"id": "m"}}
    doc.update(fields)
    return json.dumps(doc).encode()


# Bodies seen this week to give a 5xx, then any JSON value (strings with any code point).
HOSTILE = [
    b'{"id":"evt_\\ud800","object":"event","type":"t","created":1,"meta":{"id":"\\ud800"}}',
    b'{"id":"evt_1","object":"event","type":"t\\udfff","created":1,"meta":{"id":"m","type":"\\udc00"}}',
    _with(id="evt_\u202egnp.exe"),  # right-to-left override: displays as another id
    _with(type="invoice.\u200bpaid"),
    _nested(5000),
    _nested(300),
    b'{"id":"evt_big","object":"event","type":"t","created":' + b"9" * 5000 + b"}",
    b'{"id":' + b"7" * 5000 + b',"type":"t","meta":{"id":' + b"7" * 5000 + b"}}",
    b'{"id":"evt_f","object":"event","type":"t","created":1e999999}',
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(st.characters(codec=None), max_size=20),
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.dictionaries(st.sampled_from(["id", "type", "meta", "created", "x"]), kids, max_size=5)
    ),
    max_leaves=20,
)
bodies = st.one_of(
    st.sampled_from(HOSTILE),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.builds(
        lambda i, t, m: _with(id=i, type=t, meta={"id": i, "type": t}, data={"object": m}),
        st.text(st.characters(codec=None), min_size=1, max_size=12),
        st.text(st.characters(codec=None), max_size=12),
        json_values,
    ),
)


def _counts(engine: Engine) -> tuple[int, int]:
    with engine.connect() as conn:
        events = conn.execute(select(func.count()).select_from(INBOX_EVENTS)).scalar_one()
        logged = conn.execute(select(func.count()).select_from(DELIVERIES)).scalar_one()
    return int(events), int(logged)


def test_no_signed_body_gets_a_5xx(db_url: str, engine: Engine, serve: Any) -> None:
    # every refusal is logged here: past the per-address allowance they would only be counted
    every_one = {"rejected_log_per_minute": 100_000}
    url = str(serve(create_app(make_settings(db_url, receiver=every_one), engine)).url)
    client = httpx.Client(base_url=url, timeout=30)
    answers: list[int] = []

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(body=bodies, source=st.sampled_from(sorted(SIGNERS)))
    def check(body: bytes, source: str) -> None:
        before_events, before_logged = _counts(engine)
        headers = {"Content-Type": "application/json", **SIGNERS[source](body)}
        r = client.post(f"/webhooks/{source}", content=body, headers=headers)
        answers.append(r.status_code)
        assert r.status_code < 500, (source, body[:200], r.text)
        events, logged = _counts(engine)
        assert logged == before_logged + 1, "every delivery is logged, a refused one too"
        if r.status_code >= 400:
            assert r.json()["reason"] and "\n" not in r.json()["reason"]
            assert events == before_events, "a refused delivery stores no event"
        # a valid neighbour right after it is stored
        ok_headers, ok_body = stripe_delivery()
        assert client.post("/webhooks/stripe", content=ok_body, headers=ok_headers).is_success

    try:
        for body in HOSTILE:  # each one of them, whatever hypothesis draws
            for source in SIGNERS:
                check.hypothesis.inner_test(body, source)  # type: ignore[attr-defined]
        check()
        assert client.get("/healthz").status_code == 200
    finally:
        client.close()
    assert max(answers) < 500


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (HOSTILE[0], "lone surrogate"),
        (HOSTILE[2], "format character (U+202E)"),
        (HOSTILE[3], "format character (U+200B)"),
        (HOSTILE[4], "nested deeper than"),
        (HOSTILE[6], "number"),
    ],
)
def test_a_refused_body_says_why_in_one_line(
    db_url: str, engine: Engine, serve: Any, body: bytes, reason: str
) -> None:
    url = str(serve(create_app(make_settings(db_url), engine)).url)
    r = httpx.post(
        f"{url}/webhooks/stripe",
        content=body,
        headers={"Content-Type": "application/json", **_stripe(body)},
    )
    assert r.status_code == 400 and reason in r.json()["reason"], r.text
    with engine.connect() as conn:
        stored = conn.execute(select(DELIVERIES.c.outcome, DELIVERIES.c.reason)).one()
    assert str(stored.outcome) == "rejected" and reason in stored.reason
