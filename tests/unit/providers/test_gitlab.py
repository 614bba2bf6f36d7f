"""GitLab's ``X-Gitlab-Token`` (the secret token itself, no signature), pure: the vector, the
documented comparison both ways (``python-gitlab`` does not check deliveries), refusals, rotation,
the ``Idempotency-Key`` identity and its fallback, the samples."""

from __future__ import annotations

import hmac
import json
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.parsing import BadPayload, ParsedEvent
from connectors.providers.gitlab import PROVIDER
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/gitlab/signature_vector.json").read_text()
)
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
OPTIONS = SourceOptions(
    name="s", kind="gitlab", keys=PROVIDER.keys(), tolerance_seconds=PROVIDER.tolerance
)


def documented_check(header: str, secret: str) -> bool:
    """GitLab's "Validate payloads by using a secret token": the header is the token."""
    return hmac.compare_digest(header.encode(), secret.encode())


def request(headers: dict[str, str], body: bytes = BODY, now: float = NOW) -> WebhookRequest:
    return WebhookRequest("POST", URL, headers, body, now)


def verify(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> Verdict:
    return PROVIDER.verify(OPTIONS, request(headers, body), secrets)


def _headers(**changes: str | None) -> dict[str, str]:
    headers = dict(VECTOR["headers"])
    for name, value in changes.items():
        key = name.replace("_", "-")
        if value is None:
            headers.pop(key, None)
        else:
            headers[key] = value
    return headers


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify(VECTOR["headers"])
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"] == VECTOR["headers"]["idempotency-key"]
    assert event.event_type == VECTOR["event_type"]
    assert event.object_type == "push"
    assert event.delivery_id == VECTOR["headers"]["x-gitlab-webhook-uuid"]


def test_without_an_idempotency_key_the_event_uuid_identifies_it() -> None:
    """GitLab before 17.4: no Idempotency-Key; X-Gitlab-Event-UUID is the event's id."""
    event = verify(_headers(idempotency_key=None))
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["headers"]["x-gitlab-event-uuid"]
    with pytest.raises(BadPayload, match="missing event id"):
        verify(_headers(idempotency_key=None, x_gitlab_event_uuid=None))


def test_the_documented_check_and_ours_agree_both_ways() -> None:
    assert documented_check(VECTOR["headers"]["x-gitlab-token"], SECRET)
    assert PROVIDER.sign is not None
    stored = {k: v for k, v in VECTOR["headers"].items() if k != "x-gitlab-token"}
    signed = PROVIDER.sign(OPTIONS, stored, BODY, SECRET, NOW, URL)
    assert documented_check(signed["x-gitlab-token"], SECRET)
    assert signed["idempotency-key"] == stored["idempotency-key"]  # the identity travels again
    event = verify(stored | signed)
    assert isinstance(event, ParsedEvent) and event.event_id == VECTOR["event_id"]


@pytest.mark.parametrize(
    ("headers", "body", "secrets", "reason"),
    [
        (VECTOR["headers"], BODY, ("another-token",), "does not match"),
        (_headers(x_gitlab_token=SECRET + "x"), BODY, (SECRET,), "does not match"),
        (_headers(x_gitlab_token=None), BODY, (SECRET,), "missing"),
        (_headers(x_gitlab_token="é" + SECRET[1:]), BODY, (SECRET,), "does not match"),
        (_headers(x_gitlab_token="\udcff\x00"), BODY, (SECRET,), "does not match"),
    ],
    ids=["wrong-secret", "token-changed", "missing", "non-ascii", "garbage"],
)
def test_a_refused_delivery_is_a_401_naming_why(
    headers: dict[str, str], body: bytes, secrets: tuple[str, ...], reason: str
) -> None:
    with pytest.raises(SignatureError, match=reason) as raised:
        verify(headers, body, secrets)
    assert raised.value.status_code == 401


def test_nothing_binds_the_body_to_the_token() -> None:
    """As GitLab documents: a changed body with the right token is accepted (HTTPS keeps it)."""
    changed = BODY.replace(b"fixed readme", b"fixed README")
    assert isinstance(verify(VECTOR["headers"], changed), ParsedEvent)


def test_rotation_any_configured_secret_may_match() -> None:
    event = verify(VECTOR["headers"], secrets=("the-old-one", SECRET))
    assert isinstance(event, ParsedEvent)


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


def test_the_token_header_is_masked() -> None:
    assert "x-gitlab-token" in PROVIDER.sensitive_headers(OPTIONS)
