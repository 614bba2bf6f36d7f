"""Clerk (``kind = "clerk"``): Svix signatures, cross-checked both ways with the ``svix`` library.

The vector (tests/fixtures/providers/clerk/signature_vector.json) was signed with svix 2.9.1
``Webhook.sign`` over the ``user.created`` example of Clerk's webhooks overview.
"""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from svix.webhooks import Webhook

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.clerk import PROVIDER
from connectors.webhooks import SignatureError, WebhookRequest

VECTOR: dict[str, Any] = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/clerk/signature_vector.json").read_text()
)
SECRET: str = VECTOR["secret"]
OTHER = "whsec_" + base64.b64encode(b"another-secret-of-thirty-two-byt").decode()
URL = "https://hooks.example.com/webhooks/clerk"


def options() -> SourceOptions:
    return SourceOptions(
        name="s", kind="clerk", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
    )


def request(
    headers: dict[str, str], body: str | bytes, now: float = VECTOR["now"]
) -> WebhookRequest:
    raw = body.encode() if isinstance(body, str) else body
    return WebhookRequest("POST", URL, {k.lower(): v for k, v in headers.items()}, raw, now)


def verify(
    headers: dict[str, str], body: str | bytes, *secrets: str, now: float = VECTOR["now"]
) -> ParsedEvent:
    verdict = PROVIDER.verify(options(), request(headers, body, now), secrets or (SECRET,))
    assert isinstance(verdict, ParsedEvent)
    return verdict


def test_the_vector_verifies_and_reads_the_identity() -> None:
    event = verify(VECTOR["headers"], VECTOR["body"])
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert (event.object_type, event.object_id) == ("user", "user_29w83sxmDNGwOuEthce5gg56FcC")
    assert event.occurred_at == datetime(2022, 5, 31, 15, 56, 31, tzinfo=UTC)


def test_the_vector_is_what_the_svix_library_signs() -> None:
    stamp = datetime.fromtimestamp(int(VECTOR["headers"]["svix-timestamp"]), UTC)
    signed = Webhook(SECRET).sign(VECTOR["event_id"], stamp, VECTOR["body"])
    assert signed == VECTOR["headers"]["svix-signature"]


def test_library_signed_is_accepted() -> None:
    now = int(time.time())
    body = '{"data":{"id":"user_1","object":"user"},"object":"event","type":"user.deleted"}'
    signature = Webhook(SECRET).sign("msg_lib", datetime.fromtimestamp(now, UTC), body)
    headers = {"svix-id": "msg_lib", "svix-timestamp": str(now), "svix-signature": signature}
    assert verify(headers, body, now=now).event_id == "msg_lib"


def test_ours_is_accepted_by_the_library() -> None:
    assert PROVIDER.sign is not None
    now = time.time()
    body = VECTOR["body"].encode()
    headers = PROVIDER.sign(options(), {"svix-id": "msg_ours"}, body, SECRET, now, URL)
    assert headers["svix-id"] == "msg_ours"
    Webhook(SECRET).verify(body, headers)
    assert verify(headers, body, now=now).event_id == "msg_ours"


def test_a_wrong_secret_is_refused() -> None:
    with pytest.raises(SignatureError):
        verify(VECTOR["headers"], VECTOR["body"], OTHER)


def test_a_body_changed_by_one_byte_is_refused() -> None:
    body = VECTOR["body"].replace("example@", "exampLe@", 1)
    with pytest.raises(SignatureError):
        verify(VECTOR["headers"], body)


def test_a_changed_id_is_refused() -> None:
    with pytest.raises(SignatureError):
        verify({**VECTOR["headers"], "svix-id": "msg_other"}, VECTOR["body"])


@pytest.mark.parametrize("header", ["svix-signature", "svix-timestamp", "svix-id"])
def test_a_missing_header_is_refused(header: str) -> None:
    headers = {k: v for k, v in VECTOR["headers"].items() if k != header}
    with pytest.raises(SignatureError):
        verify(headers, VECTOR["body"])


@pytest.mark.parametrize(
    "value", ["v1,ünïcödé", "v1,!!!not base64!!!", "garbage", "v1,", "v1,AAAA"]
)
def test_a_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        verify({**VECTOR["headers"], "svix-signature": value}, VECTOR["body"])


@pytest.mark.parametrize("shift", [-301, 301])
def test_a_timestamp_out_of_the_window_is_refused(shift: int) -> None:
    with pytest.raises(SignatureError):
        verify(
            VECTOR["headers"], VECTOR["body"], now=int(VECTOR["headers"]["svix-timestamp"]) - shift
        )


def test_rotation_the_second_secret_matches() -> None:
    assert verify(VECTOR["headers"], VECTOR["body"], OTHER, SECRET).event_id == VECTOR["event_id"]


def test_rotation_any_listed_signature_matches() -> None:
    listed = f"v1,{base64.b64encode(b'x' * 32).decode()} {VECTOR['headers']['svix-signature']}"
    assert verify({**VECTOR["headers"], "svix-signature": listed}, VECTOR["body"]).event_id


@pytest.mark.parametrize("event_type", [None, *PROVIDER.samples.types] if PROVIDER.samples else [])
def test_the_sample_verifies_with_its_event_id(event_type: str | None) -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    sample = PROVIDER.samples.sample(options(), event_type, SECRET)
    now = time.time()
    headers = {
        **sample.headers,
        **PROVIDER.sign(options(), sample.headers, sample.body, SECRET, now, URL),
    }
    event = verify(headers, sample.body, now=now)
    assert event.event_id == sample.event_id
    assert event.event_type == (event_type or PROVIDER.samples.types[0])
    Webhook(SECRET).verify(sample.body, headers)
    assert sample.event_id != PROVIDER.samples.sample(options(), event_type, SECRET).event_id


def test_the_signature_header_is_masked() -> None:
    assert "svix-signature" in PROVIDER.sensitive_headers(options())
