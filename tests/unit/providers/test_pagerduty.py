"""PagerDuty's ``X-PagerDuty-Signature: v1=<hex>[,v1=<hex>]`` (HMAC-SHA256 of the body), pure: the
vector (two signatures, as during a rotation), the documentation's Python verifier both ways
(PagerDuty's Python clients do not verify webhooks), refusals, the samples."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.pagerduty import PROVIDER
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/pagerduty/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
OPTIONS = SourceOptions(
    name="s", kind="pagerduty", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


def documented_signature(secret: str, body: bytes) -> str:
    """One ``v1`` signature as "Verifying Signatures" computes it: hex HMAC-SHA256 of the body."""
    return "v1=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class PagerDutyVerifier:
    """The documentation's Python example ("Examples of webhooks signing"), as published."""

    def __init__(self, key: str, version: str) -> None:
        self.key = key
        self.version = version

    def verify(self, payload: str, signatures: str) -> bool:
        byte_key = self.key.encode("ASCII")
        signature = hmac.new(byte_key, payload.encode(), hashlib.sha256).hexdigest()
        signed_version = self.version + "=" + signature
        return any(hmac.compare_digest(signed_version, item) for item in signatures.split(","))


def request(headers: dict[str, str], body: bytes = BODY, now: float = NOW) -> WebhookRequest:
    return WebhookRequest("POST", URL, headers, body, now)


def verify(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> Verdict:
    return PROVIDER.verify(OPTIONS, request(headers, body), secrets)


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(VECTOR["headers"])
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert event.object_type == "incident" and event.object_id == "PGR0VU2"
    assert event.occurred_at is not None and event.occurred_at.isoformat().startswith(
        "2020-10-02T18:45:22.169"
    )


def test_the_documented_verifier_and_ours_agree_both_ways() -> None:
    header = VECTOR["headers"]["x-pagerduty-signature"]
    assert PagerDutyVerifier(SECRET, "v1").verify(VECTOR["body"], header)
    assert PagerDutyVerifier(VECTOR["other_secret"], "v1").verify(VECTOR["body"], header)
    assert PROVIDER.sign is not None
    body = b'{"event":{"id":"01BRB6ZP4M6T8ZG4X6BP63ZB9O","event_type":"service.updated"}}'
    signed = PROVIDER.sign(OPTIONS, {"content-type": "application/json"}, body, SECRET, NOW, URL)
    assert PagerDutyVerifier(SECRET, "v1").verify(body.decode(), signed["x-pagerduty-signature"])
    assert not PagerDutyVerifier("other", "v1").verify(
        body.decode(), signed["x-pagerduty-signature"]
    )
    headers = {"content-type": "application/json"}
    headers["x-pagerduty-signature"] = documented_signature(SECRET, body)
    event = verify(headers, body)
    assert isinstance(event, ParsedEvent) and event.event_id == "01BRB6ZP4M6T8ZG4X6BP63ZB9O"


def _headers(**changes: str | None) -> dict[str, str]:
    headers = dict(VECTOR["headers"])
    for name, value in changes.items():
        key = name.replace("_", "-")
        if value is None:
            headers.pop(key, None)
        else:
            headers[key] = value
    return headers


@pytest.mark.parametrize(
    ("headers", "body", "secrets", "reason"),
    [
        (VECTOR["headers"], BODY, ("another-secret",), "does not match"),
        (VECTOR["headers"], BODY[:-2] + b" }", (SECRET,), "does not match"),
        (_headers(x_pagerduty_signature=None), BODY, (SECRET,), "missing"),
        (_headers(x_pagerduty_signature="v1=" + "é" * 64), BODY, (SECRET,), "not valid hex"),
        (_headers(x_pagerduty_signature="v1=not-a-digest"), BODY, (SECRET,), "not valid hex"),
        (_headers(x_pagerduty_signature="v1=" + "00" * 32), BODY, (SECRET,), "does not match"),
        (_headers(x_pagerduty_signature="v0=" + "00" * 32), BODY, (SECRET,), "holds no|missing"),
    ],
    ids=["wrong-secret", "body-changed", "missing", "non-ascii", "garbage", "zeros", "v0"],
)
def test_a_refused_delivery_is_a_401_naming_why(
    headers: dict[str, str], body: bytes, secrets: tuple[str, ...], reason: str
) -> None:
    with pytest.raises(SignatureError, match=reason) as raised:
        verify(headers, body, secrets)
    assert raised.value.status_code == 401


def test_rotation_any_configured_secret_may_match() -> None:
    event = verify(VECTOR["headers"], secrets=("the-old-one", SECRET))
    assert isinstance(event, ParsedEvent)
    # the header's other signature (PagerDuty rotating its secret) matches the other secret alone
    assert isinstance(verify(VECTOR["headers"], secrets=(VECTOR["other_secret"],)), ParsedEvent)
    one = documented_signature(SECRET, BODY)
    assert isinstance(
        verify(_headers(x_pagerduty_signature=one), secrets=("x", SECRET)), ParsedEvent
    )


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_each_sample_signed_verifies_on_its_own_id(event_type: str) -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    sample = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    again = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert sample.event_id != again.event_id
    headers = sample.headers | PROVIDER.sign(OPTIONS, sample.headers, sample.body, SECRET, NOW, URL)
    event = PROVIDER.verify(OPTIONS, request(headers, sample.body), (SECRET,))
    assert isinstance(event, ParsedEvent)
    assert (event.event_id, event.event_type) == (sample.event_id, event_type)


def test_the_signature_header_is_masked() -> None:
    assert "x-pagerduty-signature" in PROVIDER.sensitive_headers(OPTIONS)
