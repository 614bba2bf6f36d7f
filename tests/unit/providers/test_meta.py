"""Meta webhooks (``kind = "meta"``): ``X-Hub-Signature-256``, each entry an event, the GET
verification with the source's verify token. No official Python library verifies Meta webhooks: the
vector is computed with the documented algorithm from the documentation's example payloads."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest

from connectors.declared import VerifyTokenKeys
from connectors.errors import RejectedDelivery
from connectors.options import SourceOptions
from connectors.providers.meta import PROVIDER
from connectors.webhooks import BadPayload, Batch, Handshake, SignatureError, WebhookRequest

VECTOR: dict[str, Any] = json.loads(
    (
        Path(__file__).parents[2] / "fixtures" / "providers" / "meta" / "signature_vector.json"
    ).read_text()
)
SECRET = VECTOR["secret"]
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
CHECK = VECTOR["verification"]


def options(token: str | None = VECTOR["verify_token"]) -> SourceOptions:
    return SourceOptions(
        name="s",
        kind="meta",
        keys=VerifyTokenKeys(verify_token_env="META_VERIFY_TOKEN"),
        tolerance_seconds=PROVIDER.tolerance,
        credentials={} if token is None else {"verify_token": token},
    )


def request(headers: dict[str, str] | None = None, body: bytes | None = None) -> WebhookRequest:
    return WebhookRequest(
        "POST",
        URL,
        VECTOR["headers"] if headers is None else headers,
        VECTOR["body"].encode() if body is None else body,
        NOW,
    )


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verification(query: list[tuple[str, str]]) -> WebhookRequest:
    return WebhookRequest("GET", CHECK["url"], {}, b"", NOW, query=tuple(query))


def test_vector_verifies_and_reads_each_entry() -> None:
    verdict = PROVIDER.verify(options(), request(), (SECRET,))
    assert isinstance(verdict, Batch) and len(verdict.items) == 1
    event = verdict.items[0].event
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert (event.object_type, event.object_id) == ("user", "0")
    assert event.occurred_at is not None and int(event.occurred_at.timestamp()) == 1520383571


def test_escaped_unicode_body_verifies_as_sent() -> None:
    whatsapp = VECTOR["whatsapp"]
    verdict = PROVIDER.verify(
        options(), request(whatsapp["headers"], whatsapp["body"].encode()), (SECRET,)
    )
    assert isinstance(verdict, Batch)
    event = verdict.items[0].event
    assert event.event_id == whatsapp["event_id"]
    assert event.event_type == whatsapp["event_type"]
    assert event.object_id == "102290129340398" and event.occurred_at is None


def test_entry_rebatched_keeps_its_identity() -> None:
    document = json.loads(VECTOR["body"])
    other = {"id": "1", "time": 1520383999, "messaging": [{"sender": {"id": "9"}}]}
    body = json.dumps(
        {"object": "user", "entry": [other, *document["entry"]]}, separators=(",", ":")
    ).encode()
    verdict = PROVIDER.verify(
        options(), request({"x-hub-signature-256": sign(body)}, body), (SECRET,)
    )
    assert isinstance(verdict, Batch)
    assert [item.event.event_type for item in verdict.items] == ["user.messaging", "user.photos"]
    assert verdict.items[1].event.event_id == VECTOR["event_id"]
    assert verdict.items[0].event.event_id != VECTOR["event_id"]


def test_rotation_second_secret_matches() -> None:
    assert isinstance(PROVIDER.verify(options(), request(), ("old-secret", SECRET)), Batch)


def test_wrong_secret_refused() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(), ("old-secret",))


def test_body_changed_by_one_byte_refused() -> None:
    body = VECTOR["body"].replace("update", "updatf").encode()
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request(body=body), (SECRET,))


def test_missing_signature_refused() -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request({"content-type": "application/json"}), (SECRET,))


def test_sha1_signature_alone_is_not_enough() -> None:
    legacy = "sha1=" + hmac.new(SECRET.encode(), VECTOR["body"].encode(), hashlib.sha1).hexdigest()
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request({"x-hub-signature": legacy}), (SECRET,))


@pytest.mark.parametrize("value", ["sha256=zz", "sha256=é€", "garbage", "sha256=", "sha1=00"])
def test_garbage_signature_is_a_401(value: str) -> None:
    with pytest.raises(SignatureError):
        PROVIDER.verify(options(), request({"x-hub-signature-256": value}), (SECRET,))


def test_verification_answers_the_challenge() -> None:
    assert "GET" in PROVIDER.methods
    verdict = PROVIDER.verify(options(), verification(CHECK["query"]), (SECRET,))
    assert isinstance(verdict, Handshake)
    assert verdict.reply.status == 200
    assert verdict.reply.body == CHECK["answer"].encode()
    assert verdict.reply.content_type.startswith("text/plain")


@pytest.mark.parametrize("token", ["another-token", ""])
def test_verification_with_a_wrong_token_is_a_403(token: str) -> None:
    query = [(k, token if k == "hub.verify_token" else v) for k, v in CHECK["query"]]
    with pytest.raises(RejectedDelivery) as caught:
        PROVIDER.verify(options(), verification(query), (SECRET,))
    assert caught.value.status_code == 403


def test_verification_without_a_configured_token_is_a_403() -> None:
    with pytest.raises(RejectedDelivery) as caught:
        PROVIDER.verify(options(token=None), verification(CHECK["query"]), (SECRET,))
    assert caught.value.status_code == 403


def test_get_that_is_no_verification_is_a_400() -> None:
    with pytest.raises(BadPayload):
        PROVIDER.verify(options(), verification([("hub.mode", "unsubscribe")]), (SECRET,))


def test_verify_token_env_is_required() -> None:
    assert PROVIDER.validate({"verify_token_env": None}) is not None
    assert PROVIDER.validate({"verify_token_env": "META_VERIFY_TOKEN"}) is None


def test_sample_signed_verifies() -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is not None
    for event_type in PROVIDER.samples.types:
        sample = PROVIDER.samples.sample(options(), event_type, SECRET)
        headers = PROVIDER.sign(options(), sample.headers, sample.body, SECRET, NOW, URL)
        assert headers["x-hub-signature-256"] == sign(sample.body)
        verdict = PROVIDER.verify(
            options(), WebhookRequest("POST", URL, headers, sample.body, NOW), (SECRET,)
        )
        assert isinstance(verdict, Batch)
        assert verdict.items[0].event.event_id == sample.event_id
        assert verdict.items[0].event.event_type == event_type


def test_keys_are_the_verify_token_keys() -> None:
    assert PROVIDER.keys is VerifyTokenKeys


def test_signature_headers_are_masked() -> None:
    assert {"x-hub-signature-256", "x-hub-signature"} <= PROVIDER.sensitive_headers(options())
