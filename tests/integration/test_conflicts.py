"""A stored event id delivered again with other content: kept, logged, flagged, never applied silently
(over real loopback HTTP, on SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, select, update

from connectors.providers.stripe.signature import parse_stripe, stripe_sign
from reconciler.cli.main import main
from reconciler.inbox.conflicts import apply_later, conflict_bodies
from reconciler.inbox.handlers import Event, HandlerRegistry
from reconciler.inbox.receiver import create_app
from reconciler.inbox.store import IncomingEvent, store_items
from reconciler.inbox.worker import Worker
from reconciler.reconcile.repair import set_status
from reconciler.storage.models import (
    AUDIT_LOG,
    DELIVERIES,
    DISCREPANCIES,
    INBOX_EVENTS,
    DiscrepancyStatus,
)
from tests.conftest import SECRETS, make_settings
from tests.deliveries import github_delivery, stripe_delivery

CREATED = 1_764_000_000
INVOICE = {"id": "in_1", "object": "invoice", "status": "paid", "amount_paid": 1200}


def stripe(event_id: str = "evt_X", **changes: Any) -> tuple[dict[str, str], bytes]:
    return stripe_delivery(event_id, "invoice.paid", {**INVOICE, **changes}, created=CREATED)


def discrepancies(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(select(DISCREPANCIES).order_by(DISCREPANCIES.c.field)))


def delivery_rows(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(select(DELIVERIES).order_by(DELIVERIES.c.id)))


def stored_body(engine: Engine, event_id: str = "evt_X") -> bytes:
    with engine.connect() as conn:
        return bytes(
            conn.execute(
                select(INBOX_EVENTS.c.body).where(INBOX_EVENTS.c.event_id == event_id)
            ).scalar_one()
        )


@pytest.fixture
def receiver(db_url: str, engine: Engine, serve: Any) -> str:
    return str(serve(create_app(make_settings(db_url), engine)).url)


def post(receiver: str, source: str, delivery: tuple[dict[str, str], bytes]) -> httpx.Response:
    headers, body = delivery
    return httpx.post(f"{receiver}/webhooks/{source}", content=body, headers=headers)


def applied_statuses(engine: Engine, db_url: str) -> list[str]:
    seen: list[str] = []

    def record(event: Event, conn: Any) -> None:
        seen.append(event.payload["data"]["object"]["status"])

    registry = HandlerRegistry()
    registry.register("stripe", "*", record)
    Worker(engine, make_settings(db_url), registry).drain()
    return seen


def test_a_changed_redelivery_is_a_conflict_kept_flagged_and_not_applied(
    receiver: str, engine: Engine, db_url: str
) -> None:
    first, later = stripe(), stripe(status="refunded", amount_paid=0)
    assert post(receiver, "stripe", first).json() == {"status": "accepted", "event_id": "evt_X"}
    answer = post(receiver, "stripe", later)
    assert answer.status_code == 200
    assert answer.json() == {
        "status": "conflict",
        "event_id": "evt_X",
        "fields": ["data.object.amount_paid", "data.object.status"],  # which ones differ
    }

    assert stored_body(engine) == first[1]  # the first copy stays
    rows = delivery_rows(engine)
    assert [(r.outcome, r.status_code) for r in rows] == [("accepted", 200), ("conflict", 200)]
    assert rows[0].body is None and rows[1].body == later[1]  # the conflicting body is kept
    found = discrepancies(engine)
    assert [(d.kind, d.field, d.local_value, d.source_value, d.status) for d in found] == [
        ("conflict", "data.object.amount_paid", "1200", "0", "open"),
        ("conflict", "data.object.status", "paid", "refunded", "open"),
    ]
    assert {d.event_id for d in found} == {"evt_X"} and {d.object_id for d in found} == {"in_1"}
    assert found[0].detail["delivery_row"] == rows[1].id
    assert found[0].detail["later_fingerprint"] == rows[1].fingerprint
    # the handler runs once, on the stored version
    assert applied_statuses(engine, db_url) == ["paid"]

    metrics = httpx.get(f"{receiver}/metrics").text
    assert 'hookledger_deliveries_total{outcome="conflict",source="stripe"} 1.0' in metrics
    assert 'hookledger_open_discrepancies{kind="conflict",source="stripe"} 2.0' in metrics


def test_what_the_provider_changes_between_deliveries_is_not_a_conflict(
    receiver: str, engine: Engine
) -> None:
    """Stripe counts ``pending_webhooks`` down between deliveries of one event (its default ignored
    path); key order and whitespace are not content either."""
    headers, body = stripe()
    event = json.loads(body)
    event["pending_webhooks"] = 0
    again = json.dumps(dict(reversed(list(event.items()))), indent=2).encode()
    redelivered = (_resigned(headers, again), again)
    assert post(receiver, "stripe", (headers, body)).json()["status"] == "accepted"
    assert post(receiver, "stripe", redelivered).json()["status"] == "duplicate"
    assert post(receiver, "stripe", (headers, body)).json()["status"] == "duplicate"
    assert discrepancies(engine) == []


def _resigned(headers: dict[str, str], body: bytes) -> dict[str, str]:
    return {
        **headers,
        "Stripe-Signature": stripe_sign(body, SECRETS["stripe"], int(time.time())),
    }


def test_a_source_names_its_own_ignored_paths(db_url: str, engine: Engine, serve: Any) -> None:
    settings_ = make_settings(db_url)
    github = settings_.source("github")
    assert github is not None
    object.__setattr__(github, "fingerprint_ignore", ("repository.pushed_at",))
    url = serve(create_app(settings_, engine)).url
    a = github_delivery("g-1", payload={"ref": "main", "repository": {"id": 1, "pushed_at": 1}})
    b = github_delivery("g-1", payload={"ref": "main", "repository": {"id": 1, "pushed_at": 2}})
    c = github_delivery("g-1", payload={"ref": "dev", "repository": {"id": 1, "pushed_at": 3}})
    assert [post(url, "github", d).json()["status"] for d in (a, b, c)] == [
        "accepted",
        "duplicate",
        "conflict",
    ]
    assert [(d.field, d.local_value, d.source_value) for d in discrepancies(engine)] == [
        ("ref", "main", "dev")
    ]


def _item(body: bytes, at: datetime | None = None) -> IncomingEvent:
    return IncomingEvent("stripe", parse_stripe({}, body), body, {}, at or datetime.now(UTC))


def test_two_versions_in_one_batch_and_rows_stored_before_fingerprints(engine: Engine) -> None:
    _, one = stripe("evt_B")
    _, two = stripe("evt_B", status="void")
    with engine.begin() as conn:
        outcomes = store_items(conn, [_item(one), _item(one), _item(two)])
    assert [o.outcome.value for o in outcomes] == ["accepted", "duplicate", "conflict"]
    # a row stored before migration 0011 has no fingerprint: its body is compared
    _, old = stripe("evt_OLD")
    with engine.begin() as conn:
        store_items(conn, [_item(old)])
        conn.execute(
            update(INBOX_EVENTS)
            .where(INBOX_EVENTS.c.event_id == "evt_OLD")
            .values(fingerprint=None)
        )
    _, old_changed = stripe("evt_OLD", amount_paid=1)
    with engine.begin() as conn:
        assert [o.outcome.value for o in store_items(conn, [_item(old), _item(old_changed)])] == [
            "duplicate",
            "conflict",
        ]
    assert {(d.event_id, d.field) for d in discrepancies(engine)} == {
        ("evt_B", "data.object.status"),
        ("evt_OLD", "data.object.amount_paid"),
    }


def test_a_conflict_whose_values_hold_a_lone_surrogate_or_nul_is_stored(engine: Engine) -> None:
    """JSON may escape a lone surrogate (``\\ud93f``) that UTF-8 cannot encode: PostgreSQL refused
    the discrepancy's text and the receiver answered 503 to every retry (found by
    test_signed_bodies's hypothesis run). Both are kept as their JSON escapes."""
    one = b'{"id": "evt_S", "object": "event", "type": "t", "data": {"object": {"x": "a"}}}'
    two = b'{"id": "evt_S", "object": "event", "type": "t", "data": {"object": {"x": "\\ud93f\\u0000b"}}}'
    with engine.begin() as conn:
        outcomes = store_items(conn, [_item(one), _item(two)])
    assert [o.outcome.value for o in outcomes] == ["accepted", "conflict"]
    [d] = discrepancies(engine)
    assert (d.field, d.local_value, d.source_value) == ("data.object.x", "a", "\\ud93f\\u0000b")


def test_keep_the_stored_version_then_a_new_conflict_reopens(receiver: str, engine: Engine) -> None:
    post(receiver, "stripe", stripe())
    post(receiver, "stripe", stripe(status="void"))
    [d] = discrepancies(engine)
    with engine.begin() as conn:
        set_status(
            conn, d.id, DiscrepancyStatus.RESOLVED, actor="ann", reason="keep: void is wrong"
        )
    assert discrepancies(engine)[0].status == "resolved"
    post(receiver, "stripe", stripe(status="uncollectible"))
    [d] = discrepancies(engine)
    assert (d.status, d.source_value, d.resolution) == ("open", "uncollectible", None)
    assert stored_body(engine) == stripe()[1]


def test_apply_the_later_version_replays_it_with_the_same_id_audited(
    receiver: str, engine: Engine, db_url: str
) -> None:
    post(receiver, "stripe", stripe())
    assert applied_statuses(engine, db_url) == ["paid"]
    later = stripe(status="refunded")
    post(receiver, "stripe", later)
    [d] = discrepancies(engine)
    with engine.connect() as conn:
        bodies = conflict_bodies(conn, d.id)
    assert (bodies.stored, bodies.later) == (stripe()[1], later[1])
    with engine.begin() as conn:
        result = apply_later(conn, d.id, actor="ann", reason="the refund is real")
    assert (result.previous_status, result.resolved) == ("processed", 1)
    assert stored_body(engine) == later[1]
    with engine.connect() as conn:
        event = conn.execute(select(INBOX_EVENTS)).one()
        audit = conn.execute(select(AUDIT_LOG)).one()
    assert (event.event_id, event.status, event.attempts) == ("evt_X", "pending", 0)
    assert audit.action == "conflict.apply_later" and audit.actor == "ann"
    assert audit.detail["stored_fingerprint"] == d.detail["stored_fingerprint"]
    assert audit.detail["applied_fingerprint"] == d.detail["later_fingerprint"] == event.fingerprint
    assert json.loads(audit.detail["replaced_body"])["data"]["object"]["status"] == "paid"
    assert discrepancies(engine)[0].status == "resolved"
    assert applied_statuses(engine, db_url) == ["refunded"]
    # the same later body again is now a duplicate of what is stored
    assert post(receiver, "stripe", later).json()["status"] == "duplicate"


def test_apply_later_refuses_what_is_not_a_conflict_or_is_gone(engine: Engine) -> None:
    from reconciler.errors import ActionRefusedError, NoSuchRecordError

    _, one = stripe("evt_G")
    _, two = stripe("evt_G", status="void")
    with engine.begin() as conn:
        store_items(conn, [_item(one), _item(two)])
    [d] = discrepancies(engine)
    with engine.begin() as conn:
        conn.execute(delete(DELIVERIES))
    with pytest.raises(NoSuchRecordError, match="gone"), engine.begin() as conn:
        apply_later(conn, d.id, actor="a", reason="r")
    with pytest.raises(NoSuchRecordError, match="no discrepancy"), engine.begin() as conn:
        apply_later(conn, 999_999, actor="a", reason="r")
    with engine.begin() as conn:
        conn.execute(update(DISCREPANCIES).values(kind="missing"))
    with pytest.raises(ActionRefusedError, match="not a conflict"), engine.begin() as conn:
        apply_later(conn, d.id, actor="a", reason="r")


def test_cli_exports_conflicts_and_applies_the_later_version(
    receiver: str, engine: Engine, db_url: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.e2e.test_cli import write_config

    cfg = str(write_config(tmp_path, db_url))
    post(receiver, "stripe", stripe())
    post(receiver, "stripe", stripe(status="refunded"))
    assert main(["export", "--kind", "conflict", "-o", "-", "--config", cfg]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and ",conflict," in lines[1] and "data.object.status" in lines[1]
    [d] = discrepancies(engine)
    args = ["discrepancies", "apply-later", str(d.id), "--config", cfg]
    assert main([*args, "--reason", "refund confirmed", "--actor", "bob"]) == 0
    assert "evt_X: pending -> pending with the later delivery's body" in capsys.readouterr().out
    assert main([*args, "--reason", "again"]) == 2
    assert f"discrepancy {d.id} is resolved: only an open conflict" in capsys.readouterr().err


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.dictionaries(
        st.sampled_from(["status", "amount_paid", "currency", "note"]),
        st.one_of(st.none(), st.integers(), st.text(max_size=5)),
        max_size=3,
    )
)
def test_any_redelivery_is_answered_2xx_and_never_changes_the_stored_copy(
    receiver: str, engine: Engine, changes: dict[str, Any]
) -> None:
    with engine.begin() as conn:
        conn.execute(delete(DISCREPANCIES))
        conn.execute(delete(DELIVERIES))
        conn.execute(delete(INBOX_EVENTS))
    first = stripe("evt_P")
    post(receiver, "stripe", first)
    answer = post(receiver, "stripe", stripe("evt_P", **changes))
    same = all(
        INVOICE.get(k, object()) == v and type(INVOICE.get(k)) is type(v)
        for k, v in changes.items()
    )
    assert answer.status_code == 200
    assert answer.json()["status"] == ("duplicate" if same else "conflict")
    assert stored_body(engine, "evt_P") == first[1]
    assert bool(discrepancies(engine)) == (not same)


def test_accepted_rejected_and_conflicting_deliveries_share_one_batch(engine: Engine) -> None:
    """The batch's delivery rows go in one executemany: every row must carry the same columns
    (a conflict's body and fingerprint go in a row of its own)."""
    from reconciler.inbox.store import RejectedRecord

    _, one = stripe("evt_M")
    _, two = stripe("evt_M", status="void")
    now = datetime.now(UTC)
    for items, expected in (
        (
            [_item(one), RejectedRecord("stripe", 401, "bad signature", now), _item(two)],
            ["accepted", "rejected", "conflict"],
        ),
        (
            [RejectedRecord("stripe", 401, "bad signature", now), _item(one), _item(two)],
            ["rejected", "duplicate", "conflict"],
        ),
    ):
        with engine.begin() as conn:
            assert [o.outcome.value for o in store_items(conn, items)] == expected
    rows = delivery_rows(engine)
    assert [r.outcome for r in rows].count("rejected") == 2
    assert all((r.body is not None) == (r.outcome == "conflict") for r in rows)
