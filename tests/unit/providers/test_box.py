"""Box webhooks V2 (``kind = "box"``): two signatures of body + delivery timestamp, cross-checked both
ways with Box's official SDK (``box-sdk-gen``: ``WebhooksManager.validate_message``)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from box_sdk_gen.internal.utils import compute_webhook_signature  # type: ignore[import-untyped]
from box_sdk_gen.managers.webhooks import WebhooksManager  # type: ignore[import-untyped]

from connectors.options import SourceOptions
from connectors.providers.box import PROVIDER
from connectors.webhooks import ParsedEvent, SignatureError, WebhookRequest

VECTOR: dict[str, Any] = json.loads(
    (
        Path(__file__).parents[2] / "fixtures" / "providers" / "box" / "signature_vector.json"
    ).read_text()
)
PRIMARY = VECTOR["secret"]
SECONDARY = VECTOR["secondary_secret"]
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
BODY = VECTOR["body"].encode()


def options() -> SourceOptions:
    return SourceOptions(
        name="s", kind="box", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
    )


def request(
    headers: dict[str, str] | None = None, body: bytes = BODY, now: float = NOW
) -> WebhookRequest:
    return WebhookRequest("POST", URL, VECTOR["headers"] if headers is None else headers, body, now)


def without(*names: str) -> dict[str, str]:
    return {k: v for k, v in VECTOR["headers"].items() if k not in names}


def test_vector_verifies_and_reads_identity() -> None:
    event = PROVIDER.verify(options(), request(), (PRIMARY,))
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert event.delivery_id == VECTOR["headers"]["box-delivery-id"]
    assert (event.object_type, event.object_id) == ("file", "73835521473")
    assert event.occurred_at == datetime(2016, 11, 16, 6, 40, 13, tzinfo=UTC)


@pytest.mark.parametrize("secrets", [(SECONDARY,), ("old-key", SECONDARY), ("old-key", PRIMARY)])
def test_either_key_verifies_rotation(secrets: tuple[str, ...]) -> None:
    assert isinstance(PROVIDER.verify(options(), request(), secrets), ParsedEvent)


def test_secondary_alone_verifies_while_primary_is_rotated() -> None:
    # the primary key was regenerated in the console: its header no longer matches the old key
    headers = {**VECTOR["headers"], "box-signature-primary": "AAAA" + "A" * 40}
    assert isinstance(PROVIDER.verify(options(), request(headers), (SECONDARY,)), ParsedEvent)


def test_wrong_secret_refused() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(), ("not-a-box-key",))


def test_body_changed_by_one_byte_refused() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(body=BODY.replace(b"Test", b"Tesu")), (PRIMARY,))


def test_timestamp_is_signed() -> None:
    headers = {**VECTOR["headers"], "box-delivery-timestamp": "2016-11-15T22:40:16-08:00"}
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(headers), (PRIMARY, SECONDARY))


@pytest.mark.parametrize(
    "names",
    [
        ("box-signature-primary", "box-signature-secondary"),
        ("box-delivery-timestamp",),
        ("box-signature-version",),
        ("box-signature-algorithm",),
    ],
)
def test_missing_header_refused(names: tuple[str, ...]) -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(without(*names)), (PRIMARY, SECONDARY))


@pytest.mark.parametrize(
    "name,value", [("box-signature-version", "2"), ("box-signature-algorithm", "HmacSHA512")]
)
def test_unknown_signature_form_refused(name: str, value: str) -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request({**VECTOR["headers"], name: value}), (PRIMARY,))


@pytest.mark.parametrize("value", ["not base64!", "é€ü", "", "=="])
def test_garbage_signature_is_a_401(value: str) -> None:
    headers = {
        **VECTOR["headers"],
        "box-signature-primary": value,
        "box-signature-secondary": value,
    }
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(headers), (PRIMARY, SECONDARY))


def test_stale_timestamp_refused_after_ten_minutes() -> None:
    assert PROVIDER.tolerance == 600
    PROVIDER.verify(options(), request(now=NOW + 590), (PRIMARY,))
    with pytest.raises(SignatureError, match="tolerance"):
        PROVIDER.verify(options(), request(now=NOW + 700), (PRIMARY,))


def test_library_signed_delivery_is_accepted() -> None:
    now = int(time.time()) - 5
    stamp = datetime.fromtimestamp(now, UTC).astimezone().isoformat()
    headers = {
        **without("box-signature-primary", "box-signature-secondary"),
        "box-delivery-timestamp": stamp,
    }
    body = VECTOR["body"]
    headers["box-signature-primary"] = str(compute_webhook_signature(body, headers, PRIMARY))
    headers["box-signature-secondary"] = str(compute_webhook_signature(body, headers, SECONDARY))
    assert WebhooksManager.validate_message(body, headers, PRIMARY, secondary_key=SECONDARY)
    event = PROVIDER.verify(options(), request(headers, now=now + 5), (PRIMARY,))
    assert isinstance(event, ParsedEvent) and event.event_id == VECTOR["event_id"]


def test_our_signature_is_accepted_by_the_library() -> None:
    assert PROVIDER.sign is not None
    now = float(int(time.time()) - 5)
    headers = PROVIDER.sign(options(), VECTOR["headers"], BODY, PRIMARY, now, URL)
    assert headers["box-signature-version"] == "1"
    assert headers["box-delivery-id"] == VECTOR["headers"]["box-delivery-id"]
    assert WebhooksManager.validate_message(VECTOR["body"], headers, PRIMARY)
    assert not WebhooksManager.validate_message(VECTOR["body"], headers, "not-a-box-key")


def test_sample_signed_verifies() -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    now = 1_800_000_000.0
    for event_type in PROVIDER.samples.types:
        sample = PROVIDER.samples.sample(options(), event_type, PRIMARY)
        headers = PROVIDER.sign(options(), sample.headers, sample.body, PRIMARY, now, URL)
        event = PROVIDER.verify(
            options(), WebhookRequest("POST", URL, headers, sample.body, now), (PRIMARY,)
        )
        assert isinstance(event, ParsedEvent)
        assert event.event_id == sample.event_id and event.event_type == event_type


def test_signature_headers_are_masked() -> None:
    assert {"box-signature-primary", "box-signature-secondary"} <= PROVIDER.sensitive_headers(
        options()
    )
