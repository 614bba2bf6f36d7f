"""Postmark (``kind = "postmark"``): no signature; HTTP Basic credentials on the webhook URL.

Postmark has no library that verifies webhooks (there is nothing to verify but the credentials):
these tests follow its documentation (https://postmarkapp.com/developer/webhooks/webhooks-overview,
"Basic HTTP authentication"). The vector (tests/fixtures/providers/postmark/signature_vector.json) is
the Delivery webhook example with made-up credentials.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.postmark import PROVIDER
from connectors.webhooks import SignatureError, WebhookRequest

VECTOR: dict[str, Any] = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/postmark/signature_vector.json").read_text()
)
SECRET: str = VECTOR["secret"]
URL = "https://hooks.example.com/webhooks/postmark"


def options() -> SourceOptions:
    return SourceOptions(
        name="s", kind="postmark", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
    )


def basic(credentials: str) -> str:
    return "Basic " + base64.b64encode(credentials.encode()).decode()


def verify(headers: dict[str, str], body: str | bytes, *secrets: str) -> ParsedEvent:
    raw = body.encode() if isinstance(body, str) else body
    request = WebhookRequest(
        "POST", URL, {k.lower(): v for k, v in headers.items()}, raw, VECTOR["now"]
    )
    verdict = PROVIDER.verify(options(), request, secrets or (SECRET,))
    assert isinstance(verdict, ParsedEvent)
    return verdict


def test_the_vector_verifies_and_reads_the_identity() -> None:
    event = verify(VECTOR["headers"], VECTOR["body"])
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"] == "Delivery"
    assert event.object_id == "883953f4-6105-42a2-a16a-77a8eac79483"
    assert event.occurred_at == datetime(2019, 11, 5, 16, 33, 54, 907025, tzinfo=UTC)


def test_the_header_is_the_one_a_client_sends_for_credentials_in_the_url() -> None:
    # Postmark's documented form, https://<username>:<password>@host/…, as an HTTP client (httpx's
    # BasicAuth, RFC 7617) turns it into a header
    import httpx

    user, password = SECRET.split(":", 1)
    url = urlsplit(f"https://{user}:{password}@hooks.example.com/webhooks/postmark")
    assert (url.username, url.password) == (user, password)
    request = httpx.Request("POST", "https://hooks.example.com/webhooks/postmark")
    sent = next(httpx.BasicAuth(url.username or "", url.password or "").auth_flow(request))
    assert sent.headers["authorization"] == VECTOR["headers"]["authorization"]


def test_ours_sign_sends_the_credentials() -> None:
    assert PROVIDER.sign is not None
    headers = PROVIDER.sign(options(), {}, VECTOR["body"].encode(), SECRET, 0.0, URL)
    assert headers["authorization"] == basic(SECRET)
    assert verify(headers, VECTOR["body"]).event_id == VECTOR["event_id"]


def test_wrong_credentials_are_refused() -> None:
    with pytest.raises(SignatureError):
        verify({**VECTOR["headers"], "authorization": basic("hookledger:wrong")}, VECTOR["body"])
    with pytest.raises(SignatureError):
        verify(VECTOR["headers"], VECTOR["body"], "someone:else")


def test_a_changed_body_is_another_event_not_a_refusal() -> None:
    # Postmark signs nothing: the credentials are all there is to check. A record changed by one
    # byte is accepted (with the credentials), and is another event: its digest differs
    event = verify(VECTOR["headers"], VECTOR["body"].replace("john@", "joho@"))
    assert event.event_id != VECTOR["event_id"]


def test_missing_credentials_are_refused() -> None:
    with pytest.raises(SignatureError):
        verify({"content-type": "application/json"}, VECTOR["body"])


@pytest.mark.parametrize(
    "value", ["Basic ünïcödé", "Basic !!!", "Bearer " + SECRET, SECRET, "Basic ", "basicgarbage"]
)
def test_garbage_credentials_are_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        verify({**VECTOR["headers"], "authorization": value}, VECTOR["body"])


def test_rotation_the_second_credentials_match() -> None:
    assert (
        verify(VECTOR["headers"], VECTOR["body"], "old:pass", SECRET).event_id == VECTOR["event_id"]
    )


def test_the_identity_is_the_digest_of_the_record() -> None:
    assert VECTOR["event_id"] == "postmark:" + hashlib.sha256(VECTOR["body"].encode()).hexdigest()
    again = verify(VECTOR["headers"], VECTOR["body"])
    assert again.event_id == VECTOR["event_id"]  # Postmark's retry of the record: a duplicate
    record = json.loads(VECTOR["body"])
    second = json.dumps({**record, "Recipient": "jane@example.com"}, indent=2)
    assert verify(VECTOR["headers"], second).event_id != VECTOR["event_id"]  # another recipient


@pytest.mark.parametrize(
    ("record_type", "field"),
    [
        ("Bounce", "BouncedAt"),
        ("Open", "ReceivedAt"),
        ("Click", "ReceivedAt"),
        ("SubscriptionChange", "ChangedAt"),
    ],
)
def test_each_record_type_reads_its_own_time(record_type: str, field: str) -> None:
    body = json.dumps({"RecordType": record_type, "MessageID": "m1", field: "2024-01-02T03:04:05Z"})
    event = verify(VECTOR["headers"], body)
    assert event.event_type == record_type
    assert event.occurred_at == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize("event_type", [None, *PROVIDER.samples.types] if PROVIDER.samples else [])
def test_the_sample_verifies_with_its_event_id(event_type: str | None) -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    sample = PROVIDER.samples.sample(options(), event_type, SECRET)
    headers = {
        **sample.headers,
        **PROVIDER.sign(options(), sample.headers, sample.body, SECRET, 0.0, URL),
    }
    event = verify(headers, sample.body)
    assert event.event_id == sample.event_id
    assert event.event_type == (event_type or PROVIDER.samples.types[0])
    assert event.occurred_at is not None
    assert sample.event_id != PROVIDER.samples.sample(options(), event_type, SECRET).event_id


def test_the_authorization_header_is_masked() -> None:
    assert "authorization" in PROVIDER.sensitive_headers(options())
