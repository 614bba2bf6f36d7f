"""``generic`` receives a provider by configuration alone (issue 47): every example in
docs/providers/generic.md is read as a configuration and checks that provider's own signature
vector (tests/fixtures/providers/<name>/); a configuration that cannot work is refused when read,
naming the key; hostile configurations and requests get a named refusal, never another error."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.errors import ConfigError, RejectedDelivery
from connectors.providers.generic import GENERIC
from connectors.webhooks import ParsedEvent, WebhookRequest
from reconciler.config.settings import parse_settings
from reconciler.sources import options_of

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "providers" / "generic.md").read_text()
EXAMPLES = {
    doc["sources"][0]["name"]: doc["sources"][0]
    for doc in (
        tomllib.loads(block)
        for block in re.findall(r"```toml\n(.*?)```", PAGE.split("### Its list API")[0], re.S)
    )
}


def _vector(name: str) -> dict[str, Any]:
    path = ROOT / "tests" / "fixtures" / "providers" / name / "signature_vector.json"
    return dict(json.loads(path.read_text()))


def _options(source: dict[str, Any]) -> Any:
    loaded = parse_settings({"sources": [source]}, "docs/providers/generic.md")
    return options_of(loaded.sources[0], secrets=False)


def _request(vector: dict[str, Any], **changes: Any) -> WebhookRequest:
    values = {
        "method": vector.get("method", "POST"),
        "url": vector.get("url", "https://hooks.example.com/webhooks/x"),
        "headers": {k.lower(): v for k, v in vector["headers"].items()},
        "body": vector["body"].encode(),
        "now": float(vector["now"]),
    }
    values.update(changes)
    return WebhookRequest(**values)


def test_the_page_has_the_four_providers_the_issue_names() -> None:
    assert {"paddle", "square", "zendesk", "mailgun"} <= set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_checks_its_providers_own_vector(name: str) -> None:
    vector = _vector(name)
    options = _options(EXAMPLES[name])
    event = GENERIC.verify(options, _request(vector), (vector["secret"],))
    assert isinstance(event, ParsedEvent)
    assert event.event_id == vector["event_id"]
    assert event.event_type == vector["event_type"]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_refuses_another_secret_and_a_changed_body(name: str) -> None:
    vector = _vector(name)
    options = _options(EXAMPLES[name])
    with pytest.raises(RejectedDelivery) as wrong:
        GENERIC.verify(options, _request(vector), ("not-the-secret",))
    assert wrong.value.status_code == 401
    changed = vector["body"].replace('"', "'", 1).encode()
    with pytest.raises(RejectedDelivery):
        GENERIC.verify(options, _request(vector, body=changed), (vector["secret"],))


def test_a_stale_paddle_delivery_is_refused_by_its_five_seconds() -> None:
    vector = _vector("paddle")
    options = _options(EXAMPLES["paddle"])
    with pytest.raises(RejectedDelivery, match="too old"):
        GENERIC.verify(options, _request(vector, now=vector["now"] + 60), (vector["secret"],))


def test_square_signs_the_url_it_was_called_at() -> None:
    vector = _vector("square")
    options = _options(EXAMPLES["square"])
    moved = _request(vector, url=vector["url"] + "x")
    with pytest.raises(RejectedDelivery, match="does not match"):
        GENERIC.verify(options, moved, (vector["secret"],))


@pytest.mark.parametrize(
    "keys, problem",
    [
        ({"id_json_path": "id"}, "needs key 'signature_header' or 'signature_json_path'"),
        ({"signature_header": "X-S"}, "needs key 'id_header' or 'id_json_path'"),
        (
            {"signature_header": "X-S", "id_json_path": "id", "signed_payload": "{when}{body}"},
            "'{when}' is not one of",
        ),
        (
            {"signature_header": "X-S", "id_json_path": "id", "signed_payload": "{timestamp}"},
            "must include the body",
        ),
        (
            {
                "signature_header": "X-S",
                "id_json_path": "id",
                "signed_payload": "{timestamp}{body}",
            },
            "say where it is",
        ),
        (
            {
                "signature_header": "X-S",
                "id_json_path": "id",
                "timestamp_header": "X-T",
                "timestamp_list_key": "t",
            },
            "keys 'timestamp_header' and 'timestamp_list_key' are two places",
        ),
        (
            {"signature_header": "X-S", "id_json_path": "id", "timestamp_list_key": "t"},
            "reads the signature list, which this scheme has not",
        ),
        (
            {"signature_header": "X-S", "id_json_path": "id", "signature_algorithm": "ed25519"},
            "needs key 'public_key'",
        ),
        (
            {"signature_header": "X-S", "id_json_path": "id", "signature_algorithm": "md5"},
            "key 'signature_algorithm'",
        ),
    ],
)
def test_a_configuration_that_cannot_work_is_refused_naming_the_key(
    keys: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        parse_settings({"sources": [{"name": "g", "kind": "generic", **keys}]}, "c.toml")


_key_values = st.one_of(st.text(max_size=30), st.integers(), st.booleans(), st.none())
_generic_keys = st.sampled_from(
    [
        "signature_header",
        "signature_json_path",
        "signature_algorithm",
        "signature_encoding",
        "signature_prefix",
        "signature_list_key",
        "signature_list_separator",
        "signature_pair_separator",
        "signed_payload",
        "secret_encoding",
        "timestamp_header",
        "timestamp_json_path",
        "timestamp_list_key",
        "timestamp_format",
        "public_key",
        "id_header",
        "id_json_path",
        "type_header",
        "type_json_path",
        "time_json_path",
        "events_json_path",
    ]
)


@settings(max_examples=300, deadline=None, database=None)
@given(st.dictionaries(_generic_keys, _key_values, max_size=8))
def test_any_generic_configuration_is_read_or_refused_in_one_line(keys: dict[str, Any]) -> None:
    source = {"name": "g", "kind": "generic", **{k: v for k, v in keys.items() if v is not None}}
    try:
        parse_settings({"sources": [source]}, "c.toml")
    except ConfigError as exc:
        assert str(exc).startswith("c.toml: table [sources][0] (name 'g')"), str(exc)


_headers = st.dictionaries(
    st.sampled_from(
        [
            "paddle-signature",
            "x-square-hmacsha256-signature",
            "x-zendesk-webhook-signature",
            "x-zendesk-webhook-signature-timestamp",
            "x-hub-signature",
            "content-type",
        ]
    ),
    st.text(st.characters(codec="latin-1", exclude_categories=["Cc"]), max_size=60),
    max_size=4,
)


def _nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)


_bodies = st.one_of(
    st.binary(max_size=200),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        _nested,
        max_leaves=10,
    ).map(lambda d: json.dumps(d).encode()),
)


@settings(max_examples=200, deadline=None, database=None)
@given(name=st.sampled_from(sorted(EXAMPLES)), headers=_headers, body=_bodies)
def test_any_request_to_a_configured_provider_is_refused_by_name(
    name: str, headers: dict[str, str], body: bytes
) -> None:
    options = _options(EXAMPLES[name])
    request = WebhookRequest("POST", "https://hooks.example.com/x", headers, body, 1.7e9)
    with pytest.raises(RejectedDelivery) as refused:
        GENERIC.verify(options, request, ("secret",))
    assert refused.value.status_code in (400, 401) and "\n" not in str(refused.value)


def _fixture(path: str) -> dict[str, Any]:
    return dict(json.loads((ROOT / "tests" / "fixtures" / "providers" / path).read_text()))


def _generic(**keys: Any) -> Any:
    return _options({"name": "g", "kind": "generic", "tolerance_seconds": 0, **keys})


def test_the_original_families_are_configurations_too() -> None:
    """Each built-in kind's published vector, checked by a generic source configured as that
    family: the scheme value says what each of them does."""
    stripe = _fixture("stripe/signature_vector.json")
    stripe_options = _generic(
        signature_header="Stripe-Signature",
        signature_list_key="v1",
        timestamp_list_key="t",
        signed_payload="{timestamp}.{body}",
        id_json_path="id",
    )
    header = f"t={stripe['timestamp']},v1={stripe['expected_v1']}"
    got = GENERIC.verify(
        stripe_options,
        WebhookRequest(
            "POST", "https://x/", {"stripe-signature": header}, stripe["body"].encode(), 0
        ),
        (stripe["secret"],),
    )
    assert isinstance(got, ParsedEvent) and got.event_id == "evt_test_webhook"

    standard = _fixture("standard-webhooks/signature_vector.json")
    standard_options = _generic(
        signature_header="webhook-signature",
        signature_list_key="v1",
        signature_list_separator=" ",
        signature_pair_separator=",",
        signature_encoding="base64",
        secret_encoding="whsec",
        timestamp_header="webhook-timestamp",
        signed_payload="{id}.{timestamp}.{body}",
        id_header="webhook-id",
    )
    request = WebhookRequest(
        "POST", "https://x/", standard["headers"], standard["body"].encode(), 0
    )
    got = GENERIC.verify(standard_options, request, (standard["secret"],))
    assert isinstance(got, ParsedEvent) and got.event_id == standard["headers"]["webhook-id"]

    slack = _fixture("slack/signature_vector.json")
    slack_options = _generic(
        signature_header="X-Slack-Signature",
        signature_prefix="v0=",
        timestamp_header="X-Slack-Request-Timestamp",
        signed_payload="v0:{timestamp}:{body}",
        id_json_path="event_id",
    )
    headers = {
        "x-slack-signature": slack["signature"],
        "x-slack-request-timestamp": slack["timestamp"],
    }
    request = WebhookRequest("POST", "https://x/", headers, slack["body"].encode(), 0)
    got = GENERIC.verify(slack_options, request, (slack["signing_secret"],))
    assert isinstance(got, ParsedEvent) and got.event_id == "Ev0EXAMPLE1"

    twilio = _fixture("twilio/signature_vectors.json")["status_callback"]
    twilio_options = _generic(
        signature_header="X-Twilio-Signature",
        signature_algorithm="sha1",
        signature_encoding="base64",
        signed_payload="{url}{form}",
        id_json_path="MessageSid",
    )
    body = urlencode(twilio["params"]).encode()
    headers = {
        "x-twilio-signature": twilio["signature"],
        "content-type": "application/x-www-form-urlencoded",
    }
    request = WebhookRequest("POST", twilio["url"], headers, body, 0)
    got = GENERIC.verify(twilio_options, request, (twilio["auth_token"],))
    assert isinstance(got, ParsedEvent) and got.event_id == twilio["params"]["MessageSid"]

    discord = _fixture("discord/signature_vector.json")
    discord_options = _generic(
        signature_header="X-Signature-Ed25519",
        signature_algorithm="ed25519",
        public_key=discord["public_key"],
        timestamp_header="X-Signature-Timestamp",
        signed_payload="{timestamp}{body}",
        id_json_path="application_id",
    )
    headers = {
        "x-signature-ed25519": discord["signature"],
        "x-signature-timestamp": discord["timestamp"],
    }
    request = WebhookRequest("POST", "https://x/", headers, discord["body"].encode(), 0)
    got = GENERIC.verify(discord_options, request, ())
    assert isinstance(got, ParsedEvent) and got.event_id == "111"
    tampered = WebhookRequest("POST", "https://x/", headers, discord["body"].encode() + b" ", 0)
    with pytest.raises(RejectedDelivery):
        GENERIC.verify(discord_options, tampered, ())
