"""Signature schemes: published vectors, the official libraries both ways, and every failure mode."""

from __future__ import annotations

import base64
import hmac
import json
import time
from typing import Literal

import pytest
import standardwebhooks
import stripe

from connectors import scheme_check
from connectors.parsing import ParsedEvent
from connectors.providers.generic.scheme import GenericKeys, scheme_of
from connectors.providers.github.signature import github_sign, verify_github
from connectors.providers.shopify.signature import shopify_sign, verify_shopify
from connectors.providers.standard.signature import standard_sign, verify_standard
from connectors.providers.stripe.signature import parse_stripe, stripe_sign, verify_stripe
from connectors.webhooks import SignatureError, WebhookRequest
from tests.conftest import FIXTURES


def _vector(name: str) -> dict[str, object]:
    return json.loads((FIXTURES / name / "signature_vector.json").read_text())


def _lower(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


# --- published / recorded vectors ---------------------------------------------------------------


def test_stripe_vector() -> None:
    v = _vector("stripe")
    body = str(v["body"]).encode()
    assert (
        stripe_sign(body, str(v["secret"]), int(str(v["timestamp"])))
        == v["headers"]["Stripe-Signature"]
    )  # type: ignore[index]
    verify_stripe(_lower(v["headers"]), body, [str(v["secret"])], now=time.time(), tolerance=0)  # type: ignore[arg-type]


def test_github_vector() -> None:
    v = _vector("github")
    body = str(v["body"]).encode()
    assert github_sign(body, str(v["secret"])) == "sha256=" + str(v["expected_signature_hex"])
    verify_github(_lower(v["headers"]), body, [str(v["secret"])])  # type: ignore[arg-type]


def test_shopify_vector() -> None:
    v = _vector("shopify")
    body = str(v["body"]).encode()
    assert shopify_sign(body, str(v["secret"])) == v["expected_signature"]
    verify_shopify(_lower(v["headers"]), body, [str(v["secret"])])  # type: ignore[arg-type]


def test_standard_vector() -> None:
    v = _vector("standard-webhooks")
    body = str(v["body"]).encode()
    h = v["headers"]
    assert (
        standard_sign(body, str(v["secret"]), h["webhook-id"], int(h["webhook-timestamp"]))
        == v["expected_signature"]
    )  # type: ignore[index]
    verify_standard(_lower(h), body, [str(v["secret"])], now=time.time(), tolerance=0)  # type: ignore[arg-type]


# --- cross-checks with the official libraries ---------------------------------------------------


def test_stripe_library_accepts_ours_and_we_accept_its() -> None:
    secret = "whsec_cross_check"
    body = b'{"id": "evt_1", "object": "event", "type": "charge.succeeded"}'
    now = int(time.time())
    ours = stripe_sign(body, secret, now)
    assert stripe.WebhookSignature.verify_header(body.decode(), ours, secret, tolerance=300)
    theirs_v1 = stripe.WebhookSignature._compute_signature(f"{now}.{body.decode()}", secret)
    verify_stripe({"stripe-signature": f"t={now},v1={theirs_v1}"}, body, [secret], now=now)
    event = stripe.Webhook.construct_event(body.decode(), ours, secret)
    assert event["id"] == "evt_1"


def test_stripe_library_rejects_what_we_reject() -> None:
    secret = "whsec_cross_check"
    body = b'{"id": "evt_1"}'
    old = int(time.time()) - 301
    header = stripe_sign(body, secret, old)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(body.decode(), header, secret, tolerance=300)
    with pytest.raises(SignatureError, match="too old"):
        verify_stripe({"stripe-signature": header}, body, [secret], now=time.time())


def test_standard_library_accepts_ours_and_we_accept_its() -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    wh = standardwebhooks.Webhook(secret)
    body = '{"type": "invoice.paid", "data": {"id": "in_1"}}'
    now = int(time.time())
    from datetime import UTC, datetime

    theirs = wh.sign("msg_1", datetime.fromtimestamp(now, UTC), body)
    verify_standard(
        {"webhook-id": "msg_1", "webhook-timestamp": str(now), "webhook-signature": theirs},
        body.encode(),
        [secret],
        now=now,
    )
    ours = standard_sign(body.encode(), secret, "msg_2", now)
    verified = wh.verify(
        body, {"webhook-id": "msg_2", "webhook-timestamp": str(now), "webhook-signature": ours}
    )
    assert verified["data"]["id"] == "in_1"


# --- failure modes and rotation -----------------------------------------------------------------


def test_rotation_any_configured_secret_and_any_v1_matches() -> None:
    body = b'{"id": "evt_rot"}'
    now = int(time.time())
    old_v1 = stripe_sign(body, "whsec_old", now).split("v1=")[1]
    new_v1 = stripe_sign(body, "whsec_new", now).split("v1=")[1]
    header = f"t={now},v1={old_v1},v1={new_v1},v0=ignored"
    verify_stripe({"stripe-signature": header}, body, ["whsec_new"], now=now)
    verify_stripe({"stripe-signature": header}, body, ["whsec_other", "whsec_old"], now=now)
    with pytest.raises(SignatureError, match="does not match"):
        verify_stripe({"stripe-signature": header}, body, ["whsec_other"], now=now)
    gh = github_sign(body, "second")
    verify_github({"x-hub-signature-256": gh}, body, ["first", "second"])


@pytest.mark.parametrize(
    "header, message",
    [
        ("", "missing header"),
        ("v1=abc", "no timestamp"),
        ("t=abc,v1=abc", "malformed timestamp"),
        ("t=1", "no v1"),
    ],
)
def test_stripe_malformed_headers(header: str, message: str) -> None:
    with pytest.raises(SignatureError, match=message):
        verify_stripe({"stripe-signature": header} if header else {}, b"{}", ["s"], now=1)


def test_stripe_accepts_future_timestamps_like_the_sdk() -> None:
    body = b"{}"
    future = int(time.time()) + 3600
    verify_stripe(
        {"stripe-signature": stripe_sign(body, "s", future)}, body, ["s"], now=time.time()
    )


def test_standard_rejects_old_and_future_timestamps() -> None:
    body = b"{}"
    now = int(time.time())
    for ts, word in ((now - 301, "too old"), (now + 301, "too new")):
        headers = {
            "webhook-id": "m",
            "webhook-timestamp": str(ts),
            "webhook-signature": standard_sign(
                body, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "m", ts
            ),
        }
        with pytest.raises(SignatureError, match=word):
            verify_standard(headers, body, ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], now=now)


def test_standard_signature_list_is_space_separated_and_any_entry_may_match() -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b"{}"
    now = int(time.time())
    good = standard_sign(body, secret, "m", now)
    headers = {
        "webhook-id": "m",
        "webhook-timestamp": str(now),
        "webhook-signature": f"v1a,xyz v1,Zm9v {good}",
    }
    verify_standard(headers, body, [secret], now=now)


def test_github_wrong_prefix_and_tampered_body() -> None:
    good = github_sign(b"a", "s")
    with pytest.raises(SignatureError, match="sha256="):
        verify_github({"x-hub-signature-256": good.replace("sha256=", "sha1=")}, b"a", ["s"])
    with pytest.raises(SignatureError, match="does not match"):
        verify_github({"x-hub-signature-256": good}, b"b", ["s"])


def test_shopify_bad_base64() -> None:
    with pytest.raises(SignatureError, match="base64"):
        verify_shopify({"x-shopify-hmac-sha256": "***"}, b"a", ["s"])


@pytest.mark.parametrize("encoding", ["hex", "base64"])
@pytest.mark.parametrize("algorithm", ["sha1", "sha256", "sha512"])
def test_generic_round_trip(encoding: Literal["hex", "base64"], algorithm: str) -> None:
    keys = GenericKeys(
        signature_header="X-Sig",
        signature_algorithm=algorithm,  # type: ignore[arg-type]
        signature_encoding=encoding,
        signature_prefix="v=",
        id_header="X-Id",
    )
    scheme = scheme_of(keys)
    now = time.time()
    value = scheme_check.sign(scheme, {"x-id": "e1"}, b"payload", "k", now, "http://h/")["x-sig"]
    digest = hmac.new(b"k", b"payload", algorithm).digest()
    assert value == "v=" + (
        digest.hex() if encoding == "hex" else base64.b64encode(digest).decode()
    )

    def request(body: bytes) -> WebhookRequest:
        return WebhookRequest("POST", "http://h/", {"x-sig": value, "x-id": "e1"}, body, now)

    scheme_check.verify(scheme, request(b"payload"), ("k",))
    with pytest.raises(SignatureError):
        scheme_check.verify(scheme, request(b"payload!"), ("k",))


def test_every_provider_signs_a_stored_delivery_afresh_so_that_it_verifies() -> None:
    """``hookledger drill --target``: a stored body and its (masked) headers, signed again."""
    import time as _time

    from reconciler.sources import options_of, provider
    from tests.conftest import SECRETS, make_settings
    from tests.deliveries import (
        generic_delivery,
        github_delivery,
        shopify_delivery,
        standard_delivery,
        stripe_delivery,
    )

    settings = make_settings()
    secrets = {
        "stripe": "stripe",
        "github": "github",
        "shopify": "shopify",
        "svix": "standard",
        "acme": "generic",
    }
    for name, build in (
        ("stripe", stripe_delivery),
        ("github", github_delivery),
        ("shopify", shopify_delivery),
        ("svix", standard_delivery),
        ("acme", generic_delivery),
    ):
        source = settings.source(name)
        assert source is not None
        headers, body = build()
        stored = {
            k.lower(): ("<masked>" if "sig" in k.lower() or "hmac" in k.lower() else v)
            for k, v in headers.items()
        }
        p = provider(source.kind)
        assert p.sign is not None, name
        options = options_of(source, secrets=False)
        now = _time.time()
        signed = p.sign(options, stored, body, SECRETS[secrets[name]], now, "http://127.0.0.1/x")
        request = WebhookRequest(
            "POST",
            f"http://127.0.0.1/webhooks/{name}",
            {k.lower(): v for k, v in signed.items()},
            body,
            now,
        )
        parsed = p.verify(options, request, (SECRETS[secrets[name]],))
        assert isinstance(parsed, ParsedEvent) and parsed.event_id, name


# -- senders built on Svix: the svix-* header names ---------------------------------------------------

SVIX_SECRET = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
SVIX_BODY = b'{"type":"user.created","data":{"id":"user_1"}}'


def _standard(headers: dict[str, str], body: bytes, now: float) -> ParsedEvent:
    from connectors.providers.standard import STANDARD
    from reconciler.config import parse_settings
    from reconciler.sources import options_of

    settings = parse_settings(
        {"sources": [{"name": "clerk", "kind": "standard", "signing_secret_env": "X"}]}, "<test>"
    )
    source = settings.source("clerk")
    assert source is not None
    request = WebhookRequest("POST", "http://127.0.0.1/webhooks/clerk", headers, body, now)
    verdict = STANDARD.verify(options_of(source, secrets=False), request, (SVIX_SECRET,))
    assert isinstance(verdict, ParsedEvent)
    return verdict


def test_a_standard_source_takes_the_svix_header_names_both_ways() -> None:
    from datetime import UTC, datetime

    from svix.webhooks import Webhook as SvixWebhook

    at = 1_764_547_200
    # the published vector (docs/providers.md section 6, computed with svix 2.9.1)
    signature = SvixWebhook(SVIX_SECRET).sign(
        "msg_2Lx1ExampleId", datetime.fromtimestamp(at, UTC), SVIX_BODY.decode()
    )
    assert signature == "v1,9sg6jDJUHPZ6ua8Oayz+aH83fxbgZWXRnDxv2HnXioI="
    sent = {"svix-id": "msg_2Lx1ExampleId", "svix-timestamp": str(at), "svix-signature": signature}
    parsed = _standard(sent, SVIX_BODY, at + 1)
    assert (parsed.event_id, parsed.event_type, parsed.object_id) == (
        "msg_2Lx1ExampleId",
        "user.created",
        "user_1",
    )
    # what hookledger signs, svix accepts under its own names
    now = int(time.time())
    ours = standard_sign(SVIX_BODY, SVIX_SECRET, "msg_ours", now)
    SvixWebhook(SVIX_SECRET).verify(
        SVIX_BODY, {"svix-id": "msg_ours", "svix-timestamp": str(now), "svix-signature": ours}
    )
    # a changed body under svix names is refused like one under webhook-* names
    with pytest.raises(SignatureError, match="does not match"):
        _standard(sent, SVIX_BODY.replace(b"user_1", b"user_2"), at + 1)


def test_a_v2_thin_event_reads_as_stripes_own_library_reads_it() -> None:
    """A thin event's object is its related_object (no data.object snapshot); stripe's
    parse_event_notification agrees on the identity, type and object, and accepts our signature."""
    document = {
        "id": "evt_test_65R9Ijk8DcJmk7ynL9N16S9gAvRx5Rh8pRC4lzBvhs8FOo",
        "object": "v2.core.event",
        "type": "v1.invoice.paid",
        "livemode": False,
        "created": "2026-12-05T10:00:00.000Z",
        "related_object": {"id": "in_1", "type": "invoice", "url": "/v1/invoices/in_1"},
    }
    body = json.dumps(document).encode()
    header = stripe_sign(body, "whsec_thin", int(time.time()))
    theirs = stripe.StripeClient("sk_test_x").parse_event_notification(body, header, "whsec_thin")
    ours = parse_stripe({}, body)
    assert (ours.event_id, ours.event_type) == (theirs.id, theirs.type)
    assert (ours.object_type, ours.object_id) == (
        theirs.related_object.type,
        theirs.related_object.id,
    )
    assert ours.occurred_at is not None and ours.occurred_at.year == 2026
