"""``hookledger.testing.event_of``: every kind with samples gives the event its handler would be
handed, for each of its sample types and for a payload of the test's own; anything it cannot
build is one ConfigError line naming what (pure: no I/O)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.registry import every_provider
from hookledger.testing import event_of, sample_payload
from reconciler.errors import ConfigError
from tests.kinds import EXTRA_KEYS

SAMPLED = sorted(p.kind for p in every_provider() if p.samples is not None)
UNSAMPLED = sorted(p.kind for p in every_provider() if p.samples is None)


def keys_of(kind: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    keys = EXTRA_KEYS.get(kind)
    for name, value in (keys or {}).items():
        if name.endswith("_env"):
            monkeypatch.setenv(value, "a-value-for-the-test")
    return keys


@pytest.mark.parametrize("kind", SAMPLED)
def test_every_sample_type_of_every_kind_is_an_event_as_the_worker_hands_it(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = keys_of(kind, monkeypatch)
    catalogue = next(p.samples for p in every_provider() if p.kind == kind)
    assert catalogue is not None
    ids = set()
    for event_type in catalogue.types:
        event = event_of(kind, event_type, keys=keys, source=f"my-{kind}")
        assert event.source == f"my-{kind}"
        assert event.event_id and event.event_id not in ids  # each sample a new event
        ids.add(event.event_id)
        assert (event.attempt, event.replay, event.origin) == (1, 0, "webhook")
        assert event.body and event.payload is not None
        assert event.correlation_id
        # what signed it is masked, as the receiver stores headers
        assert "whsec_" not in json.dumps(dict(event.headers))


@pytest.mark.parametrize("kind", SAMPLED)
def test_a_samples_payload_given_back_is_read_as_the_same_document(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = keys_of(kind, monkeypatch)
    document = sample_payload(kind, keys=keys)
    try:
        event = event_of(kind, payload=document, keys=keys)
    except ConfigError as exc:  # signed inside each item: only its samples can be built
        assert kind in ("adyen", "braintree"), exc
        assert "signed inside each item" in str(exc)
        return
    if kind == "mailgun":  # its signature object is inside the body, signed afresh
        document = {k: v for k, v in document.items() if k != "signature"}
        assert {k: v for k, v in event.payload.items() if k != "signature"} == document
    else:
        assert event.payload == document


def test_a_changed_field_reaches_the_handler_and_the_identity_is_read_from_it() -> None:
    document = sample_payload("stripe", "invoice.paid")
    document |= {"id": "evt_mine", "created": 1_700_000_000}
    document["data"]["object"]["amount_paid"] = 99

    event = event_of("stripe", payload=document)

    assert (event.event_id, event.event_type, event.object_type) == (
        "evt_mine",
        "invoice.paid",
        "invoice",
    )
    assert event.object_id == document["data"]["object"]["id"]
    assert event.occurred_at is not None and event.occurred_at.timestamp() == 1_700_000_000
    assert event.payload["data"]["object"]["amount_paid"] == 99


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda: event_of("strpe"), "no provider of kind 'strpe'"),
        (lambda: event_of("stripe", "invoice.nope"), "not 'invoice.nope'"),
        (lambda: event_of("stripe", payload={"no": "id"}), "the 'stripe' receiver refuses"),
        (lambda: event_of("generic"), "needs key 'signature_header'"),
        (lambda: event_of("gopay", keys=EXTRA_KEYS["gopay"]), "confirmed through the provider"),
        (lambda: event_of("adyen", payload={}), "signed inside each item"),
        (lambda: event_of("slack", payload=b"not json"), "refuses this delivery"),
    ],
)
def test_what_cannot_be_built_is_one_line_naming_why(call: Any, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        call()
    message = str(refused.value)
    assert said in message and "\n" not in message and message.startswith("hookledger.testing")


documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(["stripe", "github", "shopify", "standard", "twilio", "slack"]),
    payload=st.dictionaries(st.text(max_size=12), documents, max_size=6) | st.binary(max_size=64),
)
def test_any_payload_is_an_event_or_one_line_saying_why(kind: str, payload: Any) -> None:
    try:
        event = event_of(kind, payload=payload)
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("hookledger.testing")
    else:
        assert event.source == kind and event.event_id
