"""PayPal (``kind = "paypal"``): every delivery verified through PayPal's verify-webhook-signature
API with an OAuth client-credentials token; headers checked before any call.

PayPal's API is stood in for by ``httpx.MockTransport``: it answers SUCCESS only for the vector's
transmission, webhook id and the CRC32 of the event bytes it receives (what PayPal signs), so a
changed body or another webhook id fails as at PayPal. The vector is a real sandbox delivery from
PayPal's PHP SDK sample. The official library (paypal-server-sdk 2.4.0) has no webhook
verification to cross-check with."""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from connectors.errors import AuthError, ConfigError, ConnectorError, RejectedDelivery
from connectors.http import ProviderClient, RetryPolicy
from connectors.options import SourceOptions
from connectors.providers import paypal
from connectors.webhooks import BadPayload, ParsedEvent, SignatureError, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/paypal/signature_vector.json").read_text()
)
PROVIDER = paypal.PROVIDER
CLIENT = ("AeClientId", "EKsecret")


class PayPal:
    """A stand-in for PayPal's API: the token, the verify call (SUCCESS only for what PayPal
    signed: the vector's transmission, webhook id and the CRC32 of the event's bytes), events."""

    def __init__(self, verify_status: int = 200) -> None:
        self.calls: list[str] = []
        self.verified: list[dict[str, Any]] = []
        self.event_bytes: list[bytes] = []
        self.verify_status = verify_status
        self.tokens = 0

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.calls.append(f"{req.method} {req.url.path}")
        if req.url.path == "/v1/oauth2/token":
            expected = base64.b64encode(f"{CLIENT[0]}:{CLIENT[1]}".encode()).decode()
            if req.headers.get("authorization") != f"Basic {expected}":
                return httpx.Response(401, json={"error": "invalid_client"})
            assert parse_qs(req.content.decode()) == {"grant_type": ["client_credentials"]}
            self.tokens += 1
            return httpx.Response(
                200, json={"access_token": f"A21AA{self.tokens}", "expires_in": 32400}
            )
        assert req.headers.get("authorization", "").startswith("Bearer A21AA")
        if req.url.path == "/v1/notifications/verify-webhook-signature":
            if self.verify_status != 200:
                return httpx.Response(
                    self.verify_status, json={"name": "VALIDATION_ERROR", "message": "Invalid"}
                )
            payload = json.loads(req.content)
            self.verified.append(payload)
            # the event's bytes exactly as sent: what PayPal's CRC32 is computed over
            raw = req.content.split(b'"webhook_event":', 1)[1][:-1]
            self.event_bytes.append(raw)
            signed = (
                payload["transmission_id"] == VECTOR["headers"]["paypal-transmission-id"]
                and payload["transmission_sig"] == VECTOR["headers"]["paypal-transmission-sig"]
                and payload["transmission_time"] == VECTOR["headers"]["paypal-transmission-time"]
                and f"{binascii.crc32(raw) & 0xFFFFFFFF}"
                == VECTOR["self_verification_message"].rsplit("|", 1)[1]
                and payload["webhook_id"] == VECTOR["webhook_id"]
            )
            return httpx.Response(
                200, json={"verification_status": "SUCCESS" if signed else "FAILURE"}
            )
        if req.url.path.endswith("/resend"):
            return httpx.Response(202, json={"id": VECTOR["event_id"]})
        if req.url.path == f"/v1/notifications/webhooks-events/{VECTOR['event_id']}":
            return httpx.Response(200, content=VECTOR["body"].encode())
        return httpx.Response(404, json={"name": "RESOURCE_NOT_FOUND"})


def options(webhook_id: str = VECTOR["webhook_id"], **credentials: str) -> SourceOptions:
    return SourceOptions(
        name="s",
        kind="paypal",
        keys=paypal.PayPalKeys(
            webhook_id=webhook_id, client_id_env="PP_ID", client_secret_env="PP_SECRET"
        ),
        tolerance_seconds=PROVIDER.tolerance,
        credentials=credentials or {"client_id": CLIENT[0], "client_secret": CLIENT[1]},
    )


def connector(
    stand_in: PayPal | None = None, opts: SourceOptions | None = None
) -> tuple[paypal.PayPalConnector, PayPal]:
    stand_in = stand_in or PayPal()

    def factory(base_url: str, headers: dict[str, str], hint: str) -> ProviderClient:
        assert base_url == "https://api-m.paypal.com"
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
    built = PROVIDER.build(opts or options(), factory)
    assert isinstance(built, paypal.PayPalConnector)
    return built, stand_in


def request(headers: dict[str, str] | None = None, body: str | None = None) -> WebhookRequest:
    return WebhookRequest(
        method="POST",
        url=VECTOR["url"],
        headers=VECTOR["headers"] if headers is None else headers,
        body=(VECTOR["body"] if body is None else body).encode(),
        now=VECTOR["now"],
    )


def confirm(conn: paypal.PayPalConnector, req: WebhookRequest) -> Any:
    assert PROVIDER.confirm is not None
    return PROVIDER.confirm(conn, req)


def test_the_vector_is_verified_by_paypal_and_reads_its_identity() -> None:
    conn, stand_in = connector()
    assert PROVIDER.confirm_key is not None
    assert PROVIDER.confirm_key(request()) == VECTOR["delivery_id"]
    event = confirm(conn, request())
    assert isinstance(event, ParsedEvent)
    assert (event.event_id, event.event_type) == (VECTOR["event_id"], VECTOR["event_type"])
    assert event.delivery_id == VECTOR["delivery_id"]
    assert (event.object_type, event.object_id) == ("sale", "80F85758S3080410K")
    assert event.occurred_at is not None and event.occurred_at.isoformat() == (
        "2016-09-21T22:00:45+00:00"
    )
    assert stand_in.calls == [
        "POST /v1/oauth2/token",
        "POST /v1/notifications/verify-webhook-signature",
    ]
    sent = stand_in.verified[0]
    assert sent["auth_algo"] == "SHA256withRSA"
    assert sent["cert_url"] == VECTOR["headers"]["paypal-cert-url"]
    assert sent["webhook_id"] == VECTOR["webhook_id"]
    # the event reaches PayPal byte for byte as it arrived (PayPal's CRC32 is over those bytes)
    assert stand_in.event_bytes == [VECTOR["body"].encode()]


def test_the_token_is_fetched_once_and_renewed_before_it_expires() -> None:
    conn, stand_in = connector()
    now = [0.0]
    conn.token.clock = lambda: now[0]
    for _ in range(3):
        confirm(conn, request())
    assert stand_in.tokens == 1
    now[0] = 32400.0
    confirm(conn, request())
    assert stand_in.tokens == 2


def test_another_webhook_id_fails_at_paypal() -> None:
    conn, _ = connector(opts=options(webhook_id="1AB23456CD789012E"))
    with pytest.raises(SignatureError, match="FAILURE"):
        confirm(conn, request())


def test_a_body_changed_by_one_byte_fails_at_paypal() -> None:
    conn, _ = connector()
    with pytest.raises(SignatureError, match="FAILURE"):
        confirm(conn, request(body=VECTOR["body"].replace("21.00", "91.00")))


def test_a_changed_signature_fails_at_paypal() -> None:
    headers = dict(VECTOR["headers"])
    headers["paypal-transmission-sig"] = base64.b64encode(b"\x01" * 256).decode()
    with pytest.raises(SignatureError):
        confirm(connector()[0], request(headers))


@pytest.mark.parametrize(
    "header",
    [
        "paypal-transmission-id",
        "paypal-transmission-time",
        "paypal-transmission-sig",
        "paypal-cert-url",
        "paypal-auth-algo",
    ],
)
def test_a_missing_header_is_401_before_any_call(header: str) -> None:
    headers = {k: v for k, v in VECTOR["headers"].items() if k != header}
    assert PROVIDER.confirm_key is not None
    with pytest.raises(SignatureError):
        PROVIDER.confirm_key(request(headers))
    conn, stand_in = connector()
    with pytest.raises(SignatureError):
        confirm(conn, request(headers))
    assert stand_in.calls == []


@pytest.mark.parametrize(
    ("header", "value", "refusal"),
    [
        ("paypal-transmission-sig", "é" * 20, SignatureError),
        ("paypal-transmission-sig", "not base64!", SignatureError),
        ("paypal-transmission-sig", "QUJD" * 200, SignatureError),
        ("paypal-auth-algo", "SHA256-RSA; x", SignatureError),
        (
            "paypal-cert-url",
            "https://evil.example.com/v1/notifications/certs/CERT-1",
            SignatureError,
        ),
        ("paypal-cert-url", "http://api.paypal.com/v1/notifications/certs/CERT-1", SignatureError),
        ("paypal-cert-url", "https://api.paypal.com.evil.com/CERT-1", SignatureError),
        ("paypal-cert-url", "https://[::1/CERT", SignatureError),
        ("paypal-transmission-id", "12345", BadPayload),
        ("paypal-transmission-id", "d938e770 8046", BadPayload),
        ("paypal-transmission-id", "ü" * 10, BadPayload),
        ("paypal-transmission-time", "yesterday", BadPayload),
    ],
)
def test_garbage_headers_are_refused_before_any_call(
    header: str, value: str, refusal: type[RejectedDelivery]
) -> None:
    headers = {**VECTOR["headers"], header: value}
    conn, stand_in = connector()
    with pytest.raises(refusal):
        confirm(conn, request(headers))
    assert stand_in.calls == []


@pytest.mark.parametrize("body", ["", "not json", "[]", '{"event_type":"X"}', '{"id":"WH-1"}'])
def test_a_body_that_is_not_an_event_is_400_before_any_call(body: str) -> None:
    conn, stand_in = connector()
    with pytest.raises(BadPayload):
        confirm(conn, request(body=body))
    assert stand_in.calls == []


def test_paypal_refusing_to_verify_is_401_and_its_outage_a_connector_error() -> None:
    with pytest.raises(SignatureError, match="VALIDATION_ERROR"):
        confirm(connector(PayPal(verify_status=400))[0], request())
    with pytest.raises(ConnectorError):  # answered 503 by the receiver: PayPal sends it again
        confirm(connector(PayPal(verify_status=503))[0], request())


def test_wrong_client_credentials_are_an_auth_error() -> None:
    conn, _ = connector(opts=options(client_id=CLIENT[0], client_secret="wrong"))
    with pytest.raises(AuthError):
        confirm(conn, request())


def test_the_secret_may_come_from_api_key_env() -> None:
    opts = options(client_id=CLIENT[0])
    opts = SourceOptions(**{**opts.__dict__, "api_key": CLIENT[1], "api_key_env": "PP_KEY"})
    conn, _ = connector(opts=opts)
    assert isinstance(confirm(conn, request()), ParsedEvent)
    with pytest.raises(ConfigError):
        connector(opts=options(client_id=CLIENT[0]))


def test_the_time_is_not_checked_paypal_retries_for_three_days() -> None:
    later = WebhookRequest("POST", VECTOR["url"], VECTOR["headers"], VECTOR["body"].encode(), 2e9)
    assert isinstance(confirm(connector()[0], later), ParsedEvent)


def test_an_event_is_read_back_and_resent_by_id() -> None:
    conn, stand_in = connector()
    record = conn.fetch_event(VECTOR["event_id"])
    assert (record.event_id, record.event_type, record.object_id) == (
        VECTOR["event_id"],
        VECTOR["event_type"],
        "80F85758S3080410K",
    )
    conn.redeliver(VECTOR["event_id"])
    assert (
        stand_in.calls[-1] == f"POST /v1/notifications/webhooks-events/{VECTOR['event_id']}/resend"
    )


def test_the_configuration_rule_and_the_provider() -> None:
    good = {"kind": "paypal", "webhook_id": "9XL90610J3647323C", "client_id_env": "A"}
    assert paypal.rule({**good, "client_secret_env": "B"}) is None
    assert paypal.rule({**good, "api_key_env": "B"}) is None
    assert paypal.rule(good) is not None
    assert paypal.rule({"kind": "paypal", "client_id_env": "A", "api_key_env": "B"}) is not None
    assert paypal.rule({"kind": "gopay"}) is None
    # only PayPal signs (with its own key): hookledger sends none of its deliveries again itself
    assert PROVIDER.samples is None and PROVIDER.sign is None and not PROVIDER.signed_with_secret
    assert PROVIDER.sensitive_headers(options()) == frozenset({"paypal-transmission-sig"})
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(), ())
