"""An Adyen source over real loopback HTTP, on SQLite and PostgreSQL: a batch is one event per item,
acknowledged with [accepted]; resent, its items are duplicates; one item that does not verify, or
that the store cannot take, refuses the whole delivery and stores none of it."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest
from Adyen.util import generate_notification_sig
from sqlalchemy import Engine, select

from reconciler.inbox.receiver import create_app
from reconciler.storage.models import DELIVERIES, INBOX_EVENTS
from tests.conftest import make_settings

KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA000"
ITEM = {
    "pspReference": "7914073381342284",
    "originalReference": "",
    "merchantAccountCode": "ExampleMerchantECOM",
    "merchantReference": "order-1001",
    "amount": {"value": 1130, "currency": "EUR"},
    "eventCode": "AUTHORISATION",
    "eventDate": "2026-12-05T10:00:00+01:00",
    "success": "true",
}


@pytest.fixture
def adyen(db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("T_ADYEN_HMAC", KEY)
    settings = make_settings(
        db_url,
        sources=[{"name": "payments", "kind": "adyen", "signing_secret_env": "T_ADYEN_HMAC"}],
    )
    return f"{serve(create_app(settings, engine)).url}/webhooks/payments"


def item(**changes: Any) -> dict[str, Any]:
    one = {**copy.deepcopy(ITEM), **changes}
    one["additionalData"] = {"hmacSignature": generate_notification_sig(one, KEY).decode()}
    return one


def batch(*items: dict[str, Any]) -> bytes:
    return json.dumps(
        {"live": "false", "notificationItems": [{"NotificationRequestItem": i} for i in items]}
    ).encode()


def stored(engine: Engine) -> tuple[list[str], list[str]]:
    with engine.connect() as conn:
        events = conn.execute(select(INBOX_EVENTS.c.event_id).order_by(INBOX_EVENTS.c.id))
        outcomes = conn.execute(select(DELIVERIES.c.outcome).order_by(DELIVERIES.c.id))
        return list(events.scalars()), [str(o) for o in outcomes.scalars()]


def post(url: str, body: bytes) -> httpx.Response:
    return httpx.post(url, content=body, headers={"Content-Type": "application/json"})


def test_a_batch_is_an_event_per_item_and_adyen_gets_accepted(adyen: str, engine: Engine) -> None:
    body = batch(item(), item(pspReference="8814073381342285", success="false"))
    first = post(adyen, body)
    assert (first.status_code, first.text) == (200, "[accepted]")
    again = post(adyen, body)  # Adyen resends a batch it got no [accepted] for
    assert (again.status_code, again.text) == (200, "[accepted]")
    events, outcomes = stored(engine)
    assert events == ["7914073381342284:AUTHORISATION:true", "8814073381342285:AUTHORISATION:false"]
    assert outcomes == ["accepted", "accepted", "duplicate", "duplicate"]
    with engine.connect() as conn:
        body_of = conn.execute(
            select(INBOX_EVENTS.c.body).where(INBOX_EVENTS.c.event_id.like("8814%"))
        ).scalar_one()
    assert json.loads(body_of)["NotificationRequestItem"]["success"] == "false"


@pytest.mark.parametrize(
    ("bad", "status", "reason"),
    [
        ({"amount": {"value": 1, "currency": "EUR"}}, 401, "notification item 1: additionalData"),
        ({"pspReference": "79140733\u202e81342284"}, 400, "item 1: "),
    ],
)
def test_one_bad_item_refuses_the_whole_delivery(
    adyen: str, engine: Engine, bad: dict[str, Any], status: int, reason: str
) -> None:
    second = item(pspReference="6614073381342287")
    if "amount" in bad:  # changed after signing: its signature no longer matches
        second.update(bad)
    else:  # signed, but an id the store refuses (a right-to-left override character)
        second = item(**bad)
    answer = post(adyen, batch(item(), second))
    assert answer.status_code == status and answer.json()["reason"].startswith(reason)
    events, outcomes = stored(engine)
    assert events == [] and outcomes == ["rejected"]  # the valid first item is not stored alone


def test_basic_auth_on_the_endpoint_is_checked_before_anything_else(
    db_url: str, engine: Engine, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adyen offers HTTP Basic auth on top of its HMAC (any source may ask for it)."""
    monkeypatch.setenv("T_ADYEN_HMAC", KEY)
    monkeypatch.setenv("T_ADYEN_BASIC", "adyen-notifier:s3cret")
    settings = make_settings(
        db_url,
        sources=[
            {
                "name": "payments",
                "kind": "adyen",
                "signing_secret_env": "T_ADYEN_HMAC",
                "basic_auth_env": "T_ADYEN_BASIC",
            }
        ],
    )
    url = f"{serve(create_app(settings, engine)).url}/webhooks/payments"
    body = batch(item())
    for auth in (None, ("adyen-notifier", "wrong"), ("someone", "s3cret")):
        answer = httpx.post(
            url, content=body, auth=auth, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 401 and "Basic credentials" in answer.json()["reason"]
    ok = httpx.post(
        url,
        content=body,
        auth=("adyen-notifier", "s3cret"),
        headers={"Content-Type": "application/json"},
    )
    assert (ok.status_code, ok.text) == (200, "[accepted]")
    events, outcomes = stored(engine)
    assert len(events) == 1 and outcomes == ["rejected"] * 3 + ["accepted"]
    with engine.connect() as conn:
        headers = conn.execute(select(INBOX_EVENTS.c.headers)).scalar_one()
    assert headers["authorization"] == "<masked>"
