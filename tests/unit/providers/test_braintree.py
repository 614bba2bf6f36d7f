"""Braintree's ``bt_signature`` over ``bt_payload`` (hex HMAC-SHA1 keyed with SHA-1 of the private
key), pure: a vector made with the official ``braintree`` library, the library both ways (its
``WebhookTesting.sample_notification`` accepted by ours, our samples by its ``parse``), refusals,
rotation, the ``bt_challenge`` handshake, the XML's bounds."""

from __future__ import annotations

import base64
import json
import warnings
from pathlib import Path
from urllib.parse import parse_qs, urlencode

import pytest

from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.braintree import PROVIDER, BraintreeKeys
from connectors.providers.braintree.notification import signature
from connectors.webhooks import BadPayload, Handshake, SignatureError, Verdict, WebhookRequest

with warnings.catch_warnings():  # its import warns about its own deprecated constants
    warnings.simplefilter("ignore", DeprecationWarning)
    import braintree

VECTOR = json.loads(
    (Path(__file__).parents[2] / "fixtures/providers/braintree/signature_vector.json").read_text()
)
PUBLIC_KEY = VECTOR["public_key"]
SECRET = VECTOR["secret"]
BODY = VECTOR["body"].encode()
NOW = float(VECTOR["now"])
URL = VECTOR["url"]
FORM = {"content-type": "application/x-www-form-urlencoded"}
KEYS = PROVIDER.keys(public_key=PUBLIC_KEY)
OPTIONS = SourceOptions(name="s", kind="braintree", keys=KEYS, tolerance_seconds=PROVIDER.tolerance)
GATEWAY = braintree.BraintreeGateway(
    braintree.Configuration(
        environment=braintree.Environment.Sandbox,
        merchant_id="hookledger_merchant",
        public_key=PUBLIC_KEY,
        private_key=SECRET,
    )
)


def fields(body: bytes) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}


def verify(
    body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,), method: str = "POST"
) -> Verdict:
    return PROVIDER.verify(OPTIONS, WebhookRequest(method, URL, FORM, body, NOW), secrets)


def test_the_vector_verifies_and_reads_its_identity() -> None:
    event = verify()
    assert isinstance(event, ParsedEvent)
    assert event.event_id == VECTOR["event_id"]
    assert event.event_type == VECTOR["event_type"]
    assert (event.object_type, event.object_id) == (VECTOR["object_type"], VECTOR["object_id"])
    assert event.occurred_at is not None and int(event.occurred_at.timestamp()) == int(NOW)


def test_the_library_parses_the_vector() -> None:
    form = fields(BODY)
    notification = GATEWAY.webhook_notification.parse(form["bt_signature"], form["bt_payload"])
    assert notification.kind == VECTOR["event_type"]
    assert notification.subscription.id == VECTOR["object_id"]


@pytest.mark.parametrize(
    "kind",
    [
        braintree.WebhookNotification.Kind.SubscriptionWentPastDue,
        braintree.WebhookNotification.Kind.TransactionSettled,
        braintree.WebhookNotification.Kind.DisputeOpened,
        braintree.WebhookNotification.Kind.Check,
    ],
)
def test_library_signed_notifications_are_accepted(kind: str) -> None:
    sample = GATEWAY.webhook_testing.sample_notification(kind, "lib_id_42")
    body = urlencode({"bt_signature": sample["bt_signature"], "bt_payload": sample["bt_payload"]})
    event = verify(body.encode())
    assert isinstance(event, ParsedEvent)
    assert event.event_type == kind
    if kind != braintree.WebhookNotification.Kind.Check:
        assert event.object_id == "lib_id_42"


@pytest.mark.parametrize("event_type", PROVIDER.samples.types if PROVIDER.samples else ())
def test_our_samples_verify_and_the_library_parses_them(event_type: str) -> None:
    assert PROVIDER.samples is not None and PROVIDER.sign is None  # signed in the body
    sample = PROVIDER.samples.sample(OPTIONS, event_type, SECRET)
    assert sample.event_id != PROVIDER.samples.sample(OPTIONS, event_type, SECRET).event_id
    event = verify(sample.body)
    assert isinstance(event, ParsedEvent)
    assert (event.event_id, event.event_type) == (sample.event_id, event_type)
    form = fields(sample.body)
    notification = GATEWAY.webhook_notification.parse(form["bt_signature"], form["bt_payload"])
    assert notification.kind == event_type
    assert event.object_type is not None
    assert getattr(notification, event.object_type).id == event.object_id


def test_the_challenge_is_answered_as_the_library_answers_it() -> None:
    request = WebhookRequest(
        "GET",
        f"{URL}?bt_challenge={VECTOR['challenge']}",
        {},
        b"",
        NOW,
        query=(("bt_challenge", VECTOR["challenge"]),),
    )
    verdict = PROVIDER.verify(OPTIONS, request, (SECRET,))
    assert isinstance(verdict, Handshake)
    assert verdict.reply.status == 200
    assert verdict.reply.body.decode() == VECTOR["challenge_answer"]
    assert verdict.reply.body.decode() == GATEWAY.webhook_notification.verify(VECTOR["challenge"])
    assert verdict.reply.content_type.startswith("text/plain")
    assert "GET" in PROVIDER.methods
    for bad in ("", "XYZ", "G" * 24, "a" * 33):
        request = WebhookRequest("GET", URL, {}, b"", NOW, query=(("bt_challenge", bad),))
        with pytest.raises(BadPayload):
            PROVIDER.verify(OPTIONS, request, (SECRET,))


def test_refusals() -> None:
    form = fields(BODY)
    payload, sig = form["bt_payload"], form["bt_signature"]
    changed = base64.encodebytes(base64.b64decode(payload).replace(b"sub_8k2mq4", b"sub_8k2mq5"))
    bad = [
        (BODY, ("another-private-key",)),  # wrong secret
        (urlencode({"bt_signature": sig, "bt_payload": changed.decode()}).encode(), (SECRET,)),
        (urlencode({"bt_signature": sig, "bt_payload": payload[:-2]}).encode(), (SECRET,)),
        (urlencode({"bt_payload": payload}).encode(), (SECRET,)),  # signature missing
        (urlencode({"bt_signature": sig}).encode(), (SECRET,)),
        (urlencode({"bt_signature": "é|" + "é" * 40, "bt_payload": payload}).encode(), (SECRET,)),
        (
            urlencode({"bt_signature": PUBLIC_KEY + "|zz", "bt_payload": payload}).encode(),
            (SECRET,),
        ),
        (
            urlencode(
                {"bt_signature": "other_key|" + sig.split("|")[1], "bt_payload": payload}
            ).encode(),
            (SECRET,),
        ),
        (urlencode({"bt_signature": sig, "bt_payload": payload + "<"}).encode(), (SECRET,)),
        (b"{}", (SECRET,)),
        (b"", (SECRET,)),
    ]
    for body, secrets in bad:
        with pytest.raises(SignatureError):
            verify(body, secrets)
    with pytest.raises(BadPayload):
        verify(b"\xff\xfe")


def test_rotation_the_second_private_key_matches() -> None:
    assert isinstance(verify(secrets=("old-private-key", SECRET)), ParsedEvent)
    # several pairs: the configured public key's is the one checked
    form = fields(BODY)
    two = f"someone_else|{'0' * 40}&{form['bt_signature']}"
    body = urlencode({"bt_signature": two, "bt_payload": form["bt_payload"]}).encode()
    assert isinstance(verify(body), ParsedEvent)


def signed(xml: bytes) -> bytes:
    payload = base64.encodebytes(xml).decode()
    form = {"bt_signature": signature(PUBLIC_KEY, SECRET, payload), "bt_payload": payload}
    return urlencode(form).encode()


def test_the_xml_is_read_within_bounds() -> None:
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE n [<!ENTITY a "aaaaaaaaaa">'
        b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><notification><kind>&b;</kind></notification>'
    )
    external = (
        b'<!DOCTYPE n [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b"<notification><kind>&x;</kind></notification>"
    )
    for xml in (
        laughs,
        external,
        b"<notification><kind>check</kind>",  # not well-formed
        b"<other><kind>check</kind></other>",
        b"<notification><timestamp>2026-01-01T00:00:00Z</timestamp></notification>",  # no kind
        b"<notification><kind>check</kind>" + b" " * (1 << 20) + b"</notification>",
    ):
        with pytest.raises(BadPayload):
            verify(signed(xml))
    event = verify(signed(b"<notification><kind>check</kind><subject/></notification>"))
    assert isinstance(event, ParsedEvent) and event.event_type == "check"


def test_a_source_needs_its_public_key() -> None:
    assert PROVIDER.validate({"kind": "braintree"}) is not None
    assert PROVIDER.validate({"kind": "braintree", "public_key": PUBLIC_KEY}) is None
    assert isinstance(KEYS, BraintreeKeys)
