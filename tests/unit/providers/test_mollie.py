"""Mollie (``kind = "mollie"``): an unsigned ``id=tr_…`` form POST, confirmed by reading the payment
from Mollie's API; what the API answers is stored.

Mollie's API is stood in for by ``httpx.MockTransport``; the official library, mollie-api-python,
reads the same stand-in (through a requests adapter) and must agree with hookledger on the payment's
id and status. Nothing is signed, so there is no signature to cross-check."""

from __future__ import annotations

import copy
import datetime
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
from mollie.api.client import Client as MollieClient
from mollie.api.error import NotFoundError as MollieNotFound

from connectors.base import ScanOptions
from connectors.errors import (
    AuthError,
    ConfigError,
    ConnectorError,
    NotFoundError,
    RejectedDelivery,
    UnsupportedError,
)
from connectors.http import ProviderClient, RetryPolicy
from connectors.options import ProviderKeys, SourceOptions
from connectors.providers import mollie
from connectors.webhooks import BadPayload, Batch, SignatureError, WebhookRequest

FIXTURES = Path(__file__).parents[2] / "fixtures/providers/mollie"
VECTOR = json.loads((FIXTURES / "signature_vector.json").read_text())
PAYMENT = json.loads((FIXTURES / VECTOR["api_answer"]).read_text())
PROVIDER = mollie.PROVIDER
API_KEY = "test_dHar4XY7LxsDOtmnkVtjNVWXLSlXsM"


def paid(pid: str = "tr_5B8cwPMGnU6qLbRvo7qEZo", **changes: Any) -> dict[str, Any]:
    """The library's payment, paid (no chargeback), under another id."""
    payment: dict[str, Any] = copy.deepcopy(PAYMENT)
    del payment["amountChargedBack"]
    payment |= {
        "id": pid,
        "status": "paid",
        "paidAt": "2018-03-20T09:14:37+00:00",
        "amountRefunded": {"value": "0.00", "currency": "EUR"},
        **changes,
    }
    return payment


class Mollie:
    """A stand-in for ``GET /v2/payments/{id}``: the payments it knows, the calls it took."""

    def __init__(self, *payments: dict[str, Any], status: int = 200) -> None:
        self.payments = {p["id"]: p for p in payments}
        self.status = status
        self.calls: list[str] = []

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.calls.append(req.url.path)
        if req.headers.get("authorization") != f"Bearer {API_KEY}":
            return httpx.Response(401, json={"status": 401, "title": "Unauthorized Request"})
        if self.status != 200:
            return httpx.Response(self.status, json={"status": self.status})
        pid = req.url.path.removeprefix("/v2/payments/")
        if pid in self.payments:
            return httpx.Response(
                200, json=self.payments[pid], headers={"content-type": "application/hal+json"}
            )
        return httpx.Response(
            404,
            json={
                "status": 404,
                "title": "Not Found",
                "detail": f"No payment exists with token {pid}.",
            },
            headers={"content-type": "application/hal+json"},
        )


def options(api_key: str | None = API_KEY) -> SourceOptions:
    return SourceOptions(
        name="s",
        kind="mollie",
        keys=ProviderKeys(),
        api_key=api_key,
        api_key_env="MOLLIE_API_KEY",
        tolerance_seconds=PROVIDER.tolerance,
    )


def connector(stand_in: Mollie, api_key: str = API_KEY) -> mollie.MollieConnector:
    def factory(base_url: str, headers: dict[str, str], hint: str) -> ProviderClient:
        assert base_url == "https://api.mollie.com"
        return ProviderClient(
            "s",
            base_url,
            headers=headers,
            auth_hint=hint,
            transport=httpx.MockTransport(stand_in),
            policy=RetryPolicy(max_attempts=2, base_delay=0, max_total_wait=0.1),
            sleep=lambda s: None,
        )

    assert PROVIDER.build is not None
    built = PROVIDER.build(options(api_key), factory)
    assert isinstance(built, mollie.MollieConnector)
    return built


class Adapter(requests.adapters.BaseAdapter):
    """mollie-api-python's requests, answered by the same stand-in."""

    def __init__(self, stand_in: Mollie) -> None:
        super().__init__()
        self.stand_in = stand_in

    def send(  # type: ignore[override]
        self, request: requests.PreparedRequest, **kwargs: Any
    ) -> requests.Response:
        headers = {k: v if isinstance(v, str) else v.decode() for k, v in request.headers.items()}
        answer = self.stand_in(
            httpx.Request(str(request.method), str(request.url), headers=headers)
        )
        response = requests.Response()
        response.status_code = answer.status_code
        response._content = answer.content
        response.headers.update(answer.headers)
        response.url = str(request.url)
        response.request = request
        return response

    def close(self) -> None:
        pass


def library(stand_in: Mollie) -> MollieClient:
    client = MollieClient()
    client.set_api_key(API_KEY)
    session = requests.Session()
    session.mount("https://", Adapter(stand_in))
    client._client = session
    return client


def request(body: str = VECTOR["body"], headers: dict[str, str] | None = None) -> WebhookRequest:
    return WebhookRequest(
        method=VECTOR["method"],
        url=VECTOR["url"],
        headers=VECTOR["headers"] if headers is None else headers,
        body=body.encode(),
        now=VECTOR["now"],
    )


def confirm(conn: mollie.MollieConnector, req: WebhookRequest) -> Batch:
    assert PROVIDER.confirm is not None
    verdict = PROVIDER.confirm(conn, req)
    assert isinstance(verdict, Batch)
    return verdict


def test_the_vector_is_confirmed_by_the_api_and_stored_as_it_answered() -> None:
    stand_in = Mollie(PAYMENT)
    assert PROVIDER.confirm_key is not None
    assert PROVIDER.confirm_key(request()) == VECTOR["payment_id"]
    batch = confirm(connector(stand_in), request())
    (item,) = batch.items
    assert (item.event.event_id, item.event.event_type) == (
        VECTOR["event_id"],
        VECTOR["event_type"],
    )
    assert (item.event.object_type, item.event.object_id) == ("payment", VECTOR["payment_id"])
    assert json.loads(item.body) == PAYMENT and item.content_type == "application/json"
    assert stand_in.calls == [f"/v2/payments/{VECTOR['payment_id']}"]
    # the official library reads the same answer alike
    read = library(stand_in).payments.get(VECTOR["payment_id"])
    assert (read.id, read.status) == (VECTOR["payment_id"], "open")
    assert read.is_open()  # type: ignore[no-untyped-call]
    assert read.amount_chargedback == PAYMENT["amountChargedBack"]


@pytest.mark.parametrize(
    ("changes", "event_id", "event_type"),
    [
        ({}, "tr_5B8cwPMGnU6qLbRvo7qEZo:paid", "payment.paid"),
        (
            {"amountRefunded": {"value": "5.00", "currency": "EUR"}},
            "tr_5B8cwPMGnU6qLbRvo7qEZo:paid+refunded:5.00",
            "payment.refunded",
        ),
        ({"status": "expired", "expiredAt": "2018-03-20T09:28:37+00:00"}, None, "payment.expired"),
        ({"status": "failed"}, None, "payment.failed"),
        ({"status": "canceled"}, None, "payment.canceled"),
    ],
)
def test_each_state_is_its_own_event_and_the_library_agrees(
    changes: dict[str, Any], event_id: str | None, event_type: str
) -> None:
    payment = paid(**changes)
    stand_in = Mollie(payment)
    (item,) = confirm(connector(stand_in), request(f"id={payment['id']}")).items
    assert item.event.event_type == event_type
    assert item.event.event_id == (event_id or f"{payment['id']}:{payment['status']}")
    read = library(stand_in).payments.get(payment["id"])
    assert f"payment.{read.status}" == event_type or read.amount_refunded["value"] != "0.00"


def test_the_status_time_is_the_events_time() -> None:
    (item,) = confirm(connector(Mollie(paid())), request("id=tr_5B8cwPMGnU6qLbRvo7qEZo")).items
    assert item.event.occurred_at is not None
    assert item.event.occurred_at.isoformat() == "2018-03-20T09:14:37+00:00"


def test_the_same_state_notified_again_is_the_same_event() -> None:
    conn = connector(Mollie(paid()))
    first = confirm(conn, request("id=tr_5B8cwPMGnU6qLbRvo7qEZo")).items[0].event.event_id
    again = confirm(conn, request("id=tr_5B8cwPMGnU6qLbRvo7qEZo")).items[0].event.event_id
    assert first == again


def test_a_payment_mollie_does_not_know_is_refused_and_the_library_agrees() -> None:
    stand_in = Mollie(PAYMENT)
    with pytest.raises(RejectedDelivery) as refused:
        confirm(connector(stand_in), request("id=tr_unknown1234"))
    assert refused.value.status_code == 400
    with pytest.raises(MollieNotFound):
        library(stand_in).payments.get("tr_unknown1234")


def test_an_answer_for_another_payment_is_refused() -> None:
    class Liar(Mollie):
        def __call__(self, req: httpx.Request) -> httpx.Response:
            return httpx.Response(200, json=paid("tr_other12345"))

    with pytest.raises(RejectedDelivery):
        confirm(connector(Liar()), request())


@pytest.mark.parametrize(
    "body",
    [
        "",
        "id=",
        "id=ord_kEn1PlbGa",
        "id=pl_4Y0eZitmBnQ6IDoMqZQKh",
        "id=tr_ü",
        "id=tr_abc%00",
        "id=tr_a&id=tr_b",
        "id=tr_" + "a" * 70,
        "payment=tr_7UhSN1zuXS",
        "\xff",
    ],
)
def test_what_is_not_a_payment_id_is_400_before_any_call(body: str) -> None:
    stand_in = Mollie(PAYMENT)
    assert PROVIDER.confirm_key is not None
    with pytest.raises(BadPayload):
        PROVIDER.confirm_key(request(body))
    with pytest.raises(BadPayload):
        confirm(connector(stand_in), request(body))
    assert stand_in.calls == []


def test_a_wrong_api_key_is_an_auth_error_and_an_outage_a_connector_error() -> None:
    with pytest.raises(AuthError):
        confirm(connector(Mollie(PAYMENT), api_key="test_wrong"), request())
    with pytest.raises(ConnectorError):  # answered 503 by the receiver: Mollie calls again
        confirm(connector(Mollie(PAYMENT, status=503)), request())


def test_watched_payments_are_read_back_by_id_until_they_settle() -> None:
    """A payment the list showed unsettled is read back by id on a later run (its paid webhook is
    checked although the payment is older than the window); one still open is watched on, one
    Mollie no longer shows is let go."""
    still_open = paid("tr_stillOpen12", status="open")
    conn = connector(Mollie(PAYMENT, paid(), still_open))
    scan = ScanOptions(now=datetime.datetime(2018, 3, 21, tzinfo=datetime.UTC))
    watched = ["tr_7UhSN1zuXS", "tr_5B8cwPMGnU6qLbRvo7qEZo", "tr_stillOpen12", "tr_gone1234"]
    cursor = {"since": "2018-03-20T23:00:00+00:00", "watch": [], "unread": watched}
    (page,) = list(conn.pages(cursor, scan))
    # the library's fixture is still open: no webhook yet (https://docs.mollie.com/docs/status-change)
    assert [r.event_id for r in page.records] == ["tr_5B8cwPMGnU6qLbRvo7qEZo:paid"]
    assert page.done
    assert page.cursor == {"since": cursor["since"], "watch": ["tr_7UhSN1zuXS", "tr_stillOpen12"]}
    assert conn.fetch_event("tr_5B8cwPMGnU6qLbRvo7qEZo:paid").event_type == "payment.paid"
    with pytest.raises(NotFoundError):
        conn.fetch_event("tr_5B8cwPMGnU6qLbRvo7qEZo:open")


def test_a_notification_is_sent_again_as_it_was_and_a_stored_event_as_its_notification() -> None:
    """Nothing signs a notification: ``id=tr_…`` goes as it was; a stored event (the payment's
    JSON) is no notification, but a drill sends it as one."""
    assert PROVIDER.sign is not None
    sent = PROVIDER.sign(options(), {}, b"id=tr_7UhSN1zuXS", "", 0.0, "https://h/webhooks/m")
    assert sent == {"content-type": "application/x-www-form-urlencoded"}
    with pytest.raises(UnsupportedError):
        PROVIDER.sign(options(), {}, json.dumps(PAYMENT).encode(), "", 0.0, "https://h/")
    # a drill sends a stored event as the notification Mollie sent for it
    assert PROVIDER.delivery_of(json.dumps(PAYMENT).encode()) == b"id=tr_7UhSN1zuXS"
    assert PROVIDER.delivery_of(b"not json") == b"not json"


def test_the_configuration_rule_and_the_provider() -> None:
    assert mollie.rule({"kind": "mollie", "api_key_env": "MOLLIE_API_KEY"}) is None
    assert mollie.rule({"kind": "mollie"}) is not None
    assert mollie.rule({"kind": "gopay"}) is None
    assert PROVIDER.samples is None and not PROVIDER.signed_with_secret
    assert PROVIDER.methods == ("POST",)
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(), ())
    with pytest.raises(ConfigError):
        assert PROVIDER.build is not None
        PROVIDER.build(options(api_key=None), lambda *a: None)  # type: ignore[arg-type]
