"""Telnyx (``kind = "telnyx"``): Ed25519 over ``{timestamp}|{body}``, cross-checked both ways with the
official library (``telnyx`` 4.189.0, ``telnyx.lib.webhook_verification.verify_webhook_signature``).

The vector (tests/fixtures/providers/telnyx/signature_vector.json) was signed with PyNaCl 1.6.2
(seed 32 bytes of 0x09) over Telnyx's ``message.finalized`` example. Telnyx's library checks the
timestamp against the real clock, so the cross-checks sign at the current time.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from nacl.signing import SigningKey

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.telnyx import PROVIDER, SAMPLES
from connectors.webhooks import SignatureError, WebhookRequest


def _telnyx_verification() -> ModuleType:
    """The library's own ``telnyx/lib/webhook_verification.py``, loaded from the installed package
    without importing ``telnyx`` itself: the package's ``__init__`` loads every generated API type
    (3 s), the module needs only PyNaCl."""
    spec = importlib.util.find_spec("telnyx")
    assert spec is not None and spec.submodule_search_locations, "telnyx is not installed"
    path = Path(next(iter(spec.submodule_search_locations))) / "lib" / "webhook_verification.py"
    module_spec = importlib.util.spec_from_file_location("telnyx_webhook_verification", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


_LIBRARY = _telnyx_verification()
verify_webhook_signature = _LIBRARY.verify_webhook_signature
WebhookVerificationError: type[Exception] = _LIBRARY.WebhookVerificationError

VECTOR: dict[str, Any] = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/telnyx/signature_vector.json").read_text()
)
KEY = SigningKey(bytes([9]) * 32)
PUBLIC = base64.b64encode(bytes(KEY.verify_key)).decode()
OTHER = base64.b64encode(bytes(SigningKey(bytes([8]) * 32).verify_key)).decode()
URL = "https://hooks.example.com/webhooks/telnyx"
SIG, STAMP = "telnyx-signature-ed25519", "telnyx-timestamp"


def options(public_key: str = PUBLIC) -> SourceOptions:
    return SourceOptions(
        name="s",
        kind="telnyx",
        keys=PROVIDER.keys(public_key=public_key),
        tolerance_seconds=PROVIDER.tolerance,
    )


def verify(
    headers: dict[str, str],
    body: str | bytes,
    *,
    now: float = VECTOR["now"],
    public_key: str = PUBLIC,
) -> ParsedEvent:
    raw = body.encode() if isinstance(body, str) else body
    request = WebhookRequest("POST", URL, {k.lower(): v for k, v in headers.items()}, raw, now)
    verdict = PROVIDER.verify(options(public_key), request, ())
    assert isinstance(verdict, ParsedEvent)
    return verdict


def signed(body: str, stamp: int, key: SigningKey = KEY) -> dict[str, str]:
    signature = key.sign(f"{stamp}|{body}".encode()).signature
    return {SIG: base64.b64encode(signature).decode(), STAMP: str(stamp)}


def test_the_vector_verifies_and_reads_the_identity() -> None:
    assert VECTOR["public_key"] == PUBLIC
    event = verify(VECTOR["headers"], VECTOR["body"])
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert (event.object_type, event.object_id) == (
        "message",
        "40385f64-5717-4562-b3fc-2c963f66afa6",
    )
    assert event.occurred_at == datetime(2019, 12, 9, 21, 32, 14, 148000, tzinfo=UTC)


def test_library_signed_is_accepted_and_ours_reads_as_the_library_does() -> None:
    # Telnyx signs with its private key: nobody but Telnyx produces signatures, so "both ways" is
    # one delivery verified by the library and by us, and each refusing what the other refuses
    now = int(time.time())
    body = VECTOR["body"]
    headers = signed(body, now)
    verify_webhook_signature(body, headers, PUBLIC)
    assert verify(headers, body, now=now).event_id == VECTOR["event_id"]
    tampered = body.replace("Hello", "Hellp")
    with pytest.raises(WebhookVerificationError):
        verify_webhook_signature(tampered, headers, PUBLIC)
    with pytest.raises(SignatureError):
        verify(headers, tampered, now=now)


def test_the_library_accepts_the_vector_signature_at_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time, "time", lambda: float(VECTOR["now"]))
    verify_webhook_signature(VECTOR["body"], VECTOR["headers"], VECTOR["public_key"])


def test_the_wrong_key_is_refused() -> None:
    with pytest.raises(SignatureError):
        verify(VECTOR["headers"], VECTOR["body"], public_key=OTHER)


def test_a_body_changed_by_one_byte_is_refused() -> None:
    with pytest.raises(SignatureError):
        verify(VECTOR["headers"], VECTOR["body"].replace("World", "Worle", 1))


def test_a_changed_timestamp_is_refused() -> None:
    stamp = str(int(VECTOR["headers"][STAMP]) + 1)
    with pytest.raises(SignatureError):
        verify({**VECTOR["headers"], STAMP: stamp}, VECTOR["body"])


@pytest.mark.parametrize("header", [SIG, STAMP])
def test_a_missing_header_is_refused(header: str) -> None:
    headers = {k: v for k, v in VECTOR["headers"].items() if k != header}
    with pytest.raises(SignatureError):
        verify(headers, VECTOR["body"])


@pytest.mark.parametrize(
    "value", ["ünïcödé", "!!!not base64!!!", "AAAA", base64.b64encode(b"x" * 64).decode()]
)
def test_a_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        verify({**VECTOR["headers"], SIG: value}, VECTOR["body"])


@pytest.mark.parametrize("stamp", ["ünï", "12ab", "-5"])
def test_a_garbage_timestamp_is_a_401(stamp: str) -> None:
    with pytest.raises(SignatureError):
        verify(signed(VECTOR["body"], 0) | {STAMP: stamp}, VECTOR["body"])


@pytest.mark.parametrize("shift", [-301, 301])
def test_a_timestamp_out_of_the_window_is_refused(shift: int) -> None:
    with pytest.raises(SignatureError):
        verify(VECTOR["headers"], VECTOR["body"], now=int(VECTOR["headers"][STAMP]) - shift)


def test_the_public_key_is_required_and_checked() -> None:
    assert PROVIDER.signed_with_secret is False
    assert PROVIDER.validate({"public_key": PUBLIC}) is None
    assert PROVIDER.validate({}) is not None
    assert PROVIDER.validate({"public_key": "not a key"}) is not None


@pytest.mark.parametrize("event_type", [None, *SAMPLES.types])
def test_the_sample_verifies_with_its_event_id(event_type: str | None) -> None:
    assert PROVIDER.samples is None  # only the provider can sign
    assert PROVIDER.sign is None  # only Telnyx holds the private key: signed here with the test key
    sample = SAMPLES.sample(options(), event_type, "")
    now = int(time.time())
    body = sample.body.decode()
    headers = {**sample.headers, **signed(body, now)}
    verify_webhook_signature(body, headers, PUBLIC)
    event = verify(headers, sample.body, now=now)
    assert event.event_id == sample.event_id
    assert event.event_type == (event_type or SAMPLES.types[0])
    assert sample.event_id != SAMPLES.sample(options(), event_type, "").event_id


def test_the_signature_header_is_masked() -> None:
    assert SIG in PROVIDER.sensitive_headers(options())


def test_the_library_names_the_same_headers_and_window() -> None:
    assert (_LIBRARY.SIGNATURE_HEADER, _LIBRARY.TIMESTAMP_HEADER) == (SIG, STAMP)
    assert _LIBRARY.TIMESTAMP_TOLERANCE_SECONDS == PROVIDER.tolerance == 300
