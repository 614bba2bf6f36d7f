"""DocuSign Connect's HMAC (``X-DocuSign-Signature-<n>``: base64 HMAC-SHA256 of the body, one header
per key), pure: the vector, the documented algorithm both ways (DocuSign's Python SDK has no
verifier: its "How to validate an HMAC signature" page is the reference), several headers as several
places, the derived identity, refusals, rotation, the samples."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.docusign import PROVIDER, SCHEME
from connectors.webhooks import BadPayload, SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/docusign/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
SECOND = VECTOR["second_secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
FIRST_HEADER = "x-docusign-signature-1"
OPTIONS = SourceOptions(
    name="s", kind="docusign", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


def compute_hash(secret: str, payload: bytes) -> str:
    """DocuSign's ``ComputeHash``: base64(HMACSHA256(UTF8(secret), payload))."""
    return base64.b64encode(hmac.new(secret.encode(), payload, hashlib.sha256).digest()).decode()


def verify(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> Verdict:
    return PROVIDER.verify(OPTIONS, WebhookRequest("POST", URL, headers, body, NOW), secrets)


def sign(body: bytes, secret: str = SECRET) -> dict[str, str]:
    assert PROVIDER.sign is not None
    return PROVIDER.sign(OPTIONS, {"content-type": "application/json"}, body, secret, NOW, URL)


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(VECTOR["headers"])
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert event.object_type == VECTOR["object_type"]
    assert event.object_id == VECTOR["object_id"]
    assert event.occurred_at is not None and event.occurred_at.year == 2025


def test_the_documented_algorithm_and_ours_agree_both_ways() -> None:
    assert compute_hash(SECRET, BODY) == VECTOR["headers"][FIRST_HEADER]
    assert compute_hash(SECOND, BODY) == VECTOR["headers"]["x-docusign-signature-2"]
    body = b'{"event":"envelope-sent","generatedDateTime":"2025-01-01T00:00:00Z","data":{}}\r\n'
    assert isinstance(verify({FIRST_HEADER: compute_hash(SECRET, body)}, body), ParsedEvent)
    assert sign(body)[FIRST_HEADER] == compute_hash(SECRET, body)


def test_every_signature_header_is_a_place_and_masked() -> None:
    masked = PROVIDER.sensitive_headers(OPTIONS)
    assert {FIRST_HEADER, "x-docusign-signature-2", "x-docusign-signature-100"} <= masked
    assert len(SCHEME.signatures) == 100
    # the second key's header alone, the second key alone
    only_second = {"x-docusign-signature-2": VECTOR["headers"]["x-docusign-signature-2"]}
    assert isinstance(verify(only_second, secrets=(SECOND,)), ParsedEvent)
    # the last place too
    assert isinstance(verify({"x-docusign-signature-100": compute_hash(SECRET, BODY)}), ParsedEvent)


def test_a_retry_is_the_same_event_another_message_is_not() -> None:
    document = json.loads(BODY)
    document["retryCount"] = 3
    retry = json.dumps(document, separators=(",", ":")).encode()
    event = verify(sign(retry), retry)
    assert isinstance(event, ParsedEvent) and event.event_id == VECTOR["event_id"]
    document["event"] = "envelope-voided"
    other = json.dumps(document).encode()
    event = verify(sign(other), other)
    assert isinstance(event, ParsedEvent) and event.event_id != VECTOR["event_id"]


def test_a_wrong_secret_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], secrets=("not_a_connect_key",))


def test_a_body_changed_by_one_byte_is_refused() -> None:
    with pytest.raises(SignatureError, match="does not match"):
        verify(VECTOR["headers"], BODY.replace(b"completed", b"completeD"))


def test_a_missing_signature_is_refused() -> None:
    with pytest.raises(SignatureError, match="missing"):
        verify({"content-type": "application/json", "x-authorization-digest": "HMACSHA256"})


@pytest.mark.parametrize("value", ["é" * 44, "not base64!", "AAAA", "=", "\x00"])
def test_a_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        verify({FIRST_HEADER: value})


def test_rotation_the_second_secret_matches() -> None:
    headers = {FIRST_HEADER: VECTOR["headers"][FIRST_HEADER]}
    event = verify(headers, secrets=("old_connect_key", SECRET))
    assert isinstance(event, ParsedEvent) and event.event_id == VECTOR["event_id"]


@pytest.mark.parametrize(
    "body", [b"<DocuSignEnvelopeInformation/>", b'{"envelopeId":"e1","status":"completed"}']
)
def test_a_signed_message_that_is_no_json_sim_is_a_400(body: bytes) -> None:
    with pytest.raises(BadPayload):
        verify(sign(body), body)


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_every_sample_verifies_and_is_its_own_event(event_type: str) -> None:
    assert PROVIDER.samples is not None
    first = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    second = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert first.event_id != second.event_id
    event = verify({**first.headers, **sign(first.body)}, first.body)
    assert isinstance(event, ParsedEvent)
    assert event.event_id == first.event_id
    assert event.event_type == event_type
    assert event.object_type == "envelope" and event.occurred_at is not None
