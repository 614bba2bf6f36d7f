"""Braintree's webhook notifications, received (``kind = "braintree"``): a signed form, a challenge.

Facts, with their sources (Braintree's "Webhooks: Parse",
https://developer.paypal.com/braintree/docs/guides/webhooks/parse; "Creating Webhooks",
https://developers.braintreepayments.com/ios+php/guides/webhooks/create; the official library,
``braintree`` 4.48.0: ``webhook_notification_gateway.py``, ``util/crypto.py``,
``webhook_testing_gateway.py``):

- **Signature.** A notification is a POST whose ``application/x-www-form-urlencoded`` body has two
  fields, ``bt_signature`` and ``bt_payload``. ``bt_payload`` is the notification's XML in base64
  (lines of 76 characters). ``bt_signature`` is ``<public_key>|<hex>`` pairs joined by ``&``; the
  pair of the merchant's public key holds the hex HMAC-SHA1 of ``bt_payload`` (as sent, or with a
  trailing newline) keyed with the SHA-1 digest of the merchant's private key
  (``Crypto.sha1_hmac_hash``). So a source sets ``public_key`` (the API public key, a configuration
  value) and the private key comes from ``signing_secret_env`` (several, comma-separated: any
  matches). That is not one of :class:`connectors.scheme.Scheme`'s families (the key is hashed
  first, the message is a form field, the signature is keyed by public key): verified here.
- **Challenge.** When a webhook is created Braintree sends "a GET request to the provided URL with
  a query param named ``bt_challenge``"; the answer, "returned as the body of the response", is
  ``<public_key>|<hex HMAC-SHA1 of the challenge>`` keyed as above (``WebhookNotification.verify``,
  which accepts 20 to 32 lower-case hex digits). Answered 200 as a handshake, with the first
  private key; never stored.
- **Identity.** The XML is ``<notification><timestamp>…<kind>…<subject><subscription><id>…``.
  Braintree sends no notification id and retries the same notification "every hour for up to 24
  hours" until a 2xx within 30 seconds: the identity is the SHA-256 of the XML
  (``braintree:<hex>``), so a retry is a duplicate. Type ``kind`` (``subscription_went_past_due``);
  object the subject's element and its ``id``; time ``timestamp``. The signature carries no time:
  no window.
- **XML.** Read with :mod:`xml.etree.ElementTree` (``defusedxml`` is not a dependency) within bounds:
  at most 1 MiB, and a payload with a DTD (``<!DOCTYPE``, ``<!ENTITY``) is refused before parsing,
  so no entity is ever declared, expanded or fetched; the signature is checked first, so only
  Braintree's XML is parsed at all.
"""

from __future__ import annotations

import base64
import hashlib
import random
import re
import string
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from pydantic import Field

from connectors.catalogue import Catalogue, Sample
from connectors.options import ProviderKeys, SourceOptions
from connectors.parsing import form_fields
from connectors.provider import Provider
from connectors.providers.braintree.notification import (
    ID_PREFIX,
    challenge_answer,
    check,
    event_of,
    read_xml,
    signature,
)
from connectors.webhooks import (
    BadPayload,
    Handshake,
    Reply,
    SignatureError,
    Verdict,
    WebhookRequest,
    query_pairs,
)

_CHALLENGE = re.compile(r"[a-f0-9]{20,32}")


class BraintreeKeys(ProviderKeys):
    # the API public key (Control Panel > API Keys), whose pair in bt_signature is checked
    public_key: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_\-]{1,64}$")


def rule(values: Mapping[str, Any]) -> str | None:
    if not values.get("public_key"):
        return (
            "kind 'braintree' needs key 'public_key' (the API public key, from the Control Panel)"
        )
    return None


def _public_key(options: SourceOptions) -> str:
    public_key = options.own(BraintreeKeys).public_key
    if not public_key:  # the rule requires it
        raise SignatureError("no public_key is configured")
    return public_key


def verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    public_key = _public_key(options)
    if request.method.upper() == "GET":
        challenge = request.query_value("bt_challenge")
        if challenge is None:
            challenge = dict(query_pairs(request.url)).get("bt_challenge")
        if challenge is None or not _CHALLENGE.fullmatch(challenge):
            raise BadPayload("a GET needs bt_challenge: 20 to 32 lower-case hex digits")
        if not secrets:
            raise SignatureError("no private key is configured (signing_secret_env)")
        answer = challenge_answer(public_key, secrets[0], challenge)
        return Handshake(Reply(200, answer.encode()), "bt_challenge")
    try:
        fields = form_fields(request.body)
    except ValueError:
        raise BadPayload("body is not a readable form") from None
    bt_signature, bt_payload = fields.get("bt_signature"), fields.get("bt_payload")
    if not isinstance(bt_signature, str) or not isinstance(bt_payload, str):
        raise SignatureError("missing bt_signature or bt_payload (each once)")
    check(bt_signature, bt_payload, public_key, secrets)
    return event_of(read_xml(bt_payload))


# -- samples: shaped after the library's WebhookTesting.sample_notification ---------------------


def _subject(kind: str, object_id: str) -> str:
    if kind == "transaction_settled":
        return f"""<transaction>
              <id>{object_id}</id>
              <status>settled</status>
              <type>sale</type>
              <currency-iso-code>USD</currency-iso-code>
              <amount>100.00</amount>
              <merchant-account-id>hookledger_merchant</merchant-account-id>
              <payment-instrument-type>credit_card</payment-instrument-type>
            </transaction>"""
    if kind == "dispute_opened":
        return f"""<dispute>
          <id>{object_id}</id>
          <amount>100.00</amount>
          <amount-disputed>100.00</amount-disputed>
          <currency-iso-code>USD</currency-iso-code>
          <kind>chargeback</kind>
          <reason>fraud</reason>
          <status>open</status>
          <transaction>
            <id>{object_id[::-1]}</id>
            <amount>100.00</amount>
          </transaction>
        </dispute>"""
    return f"""<subscription>
                <id>{object_id}</id>
                <status>Past Due</status>
                <transactions type="array"></transactions>
                <add_ons type="array"></add_ons>
                <discounts type="array"></discounts>
            </subscription>"""


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    object_id = "".join(random.choices(string.ascii_lowercase + string.digits, k=8))
    xml = f"""
            <notification>
                <timestamp type="datetime">{now}</timestamp>
                <kind>{event_type}</kind>
                <subject>
            {_subject(event_type, object_id)}
        </subject>
            </notification>
        """.encode()
    payload = base64.encodebytes(xml).decode()  # lines of 76 characters, as Braintree's
    form = {"bt_signature": signature(_public_key(options), secret, payload), "bt_payload": payload}
    body = urlencode(form).encode()
    event_id = ID_PREFIX + hashlib.sha256(xml).hexdigest()
    return Sample(event_id, body, {"content-type": "application/x-www-form-urlencoded"})


SAMPLES = Catalogue(
    ("subscription_went_past_due", "transaction_settled", "dispute_opened"), _sample
)

PROVIDER = Provider(
    "braintree",
    verify=verify,
    keys=BraintreeKeys,
    validate=rule,
    # the signature is inside the body (as Adyen's): a stored delivery cannot be signed again;
    # the samples are signed when built
    sign=None,
    samples=SAMPLES,
    methods=("POST", "GET"),
)
