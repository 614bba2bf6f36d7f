"""Recurly's JSON webhooks, received (``kind = "recurly"``): a timed signature with a positional header.

Facts, with their sources:

- **Signature.** ``recurly-signature: <timestamp ms>,<sig1>[,<sig2>]``: "a Unix timestamp (in
  milliseconds), followed by one or more hexadecimal signatures"; "split the header value on
  commas. The first element is the timestamp; the remaining elements are signature(s). Any other
  format is invalid." Each signature is the hex HMAC-SHA256 of ``{timestamp}.{raw body}`` keyed with
  the endpoint's secret key (used as is). After a key is regenerated "both the new and previous
  keys remain valid for 24 hours, resulting in multiple signatures in the header" (rotation).
  Source: "Signature verification" (https://docs.recurly.com/recurly-subscriptions/docs/signature-verification,
  also https://docs.recurly.com/v1.3/docs/signature-verification). Only JSON webhooks are signed;
  XML ones are not (protect those with ``basic_auth_env``; they are refused here).
- **Time window.** Recurly's client libraries refuse a timestamp more than five minutes from now,
  either side: Ruby ``Recurly::Webhooks::DEFAULT_TOLERANCE = 5 * 60 * 1000`` (ms) compared with
  ``(now - timestamp).abs`` (https://recurly.github.io/recurly-client-ruby/Recurly/Webhooks.html;
  recurly/recurly-client-ruby ``lib/recurly/webhooks.rb``), Go ``DEFAULT_WEBHOOK_TOLERANCE``.
  The Python library ``recurly`` (4.79.0) has no webhook verification.
- **Identity.** The body is ``{"id", "object_type", "site_id", "event_type", "event_time", …}``
  (``{"id": "r3oplsj3zo7a", "object_type": "account", "event_type": "created", "event_time":
  "2022-06-24T19:55:25Z", "account_code": "verena"}``, "Account notifications",
  https://docs.recurly.com/v1.3/docs/account-notifications). ``id`` is the object's (the account's:
  the docs' "created" and "updated" examples share it), so it identifies no event; Recurly sends
  no event id. The identity is a hash of the body (``recurly:<sha256>``): a retry of the same
  notification is a duplicate. Type ``<object_type>.<event_type>`` (``account.created``), object
  ``object_type`` and ``id``, time ``event_time``.
- **Answer.** "Your endpoint must respond with a 2XX status code" within 5 seconds
  (https://recurly.com/developers/reference/webhooks).

The header is positional, which :class:`connectors.scheme.SignatureList` (``k=v`` items) cannot
say: :func:`as_listed` rewrites it as ``t=<timestamp>,v1=<sig1>,v1=<sig2>`` and
:mod:`connectors.scheme_check` does the rest; :func:`sign` writes Recurly's form back.

A reconciliation lists accounts, subscriptions and invoices by ``updated_at``, judged by object
(``api.RecurlyObjects``: what it can and cannot find, with sources, is said there).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import string
from collections.abc import Mapping
from datetime import UTC, datetime

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json
from connectors.declared import declared
from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.providers.recurly.api import BUDGET, RecurlyKeys, build, rule
from connectors.scheme import Scheme, SignatureList
from connectors.webhooks import SignatureError, Verdict, WebhookRequest

HEADER = "recurly-signature"

SCHEME = Scheme(
    signatures=("header:Recurly-Signature",),
    signed="{timestamp}.{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    # as rewritten by as_listed(): Recurly's own header has no keys
    listed=SignatureList(key="v1", separator=",", pair="="),
    timestamp="list:t",
    time_format="unix_ms",
    tolerance=300,
    event_id="hash",
    id_prefix="recurly:",
    event_type="body:event_type",  # composed with object_type below
    object_type="body:object_type",
    object_id="body:id",
    occurred_at="body:event_time",
)


def as_listed(value: str) -> str:
    """Recurly's ``<timestamp>,<sig1>,<sig2>`` as the scheme's ``t=…,v1=…,v1=…``."""
    stamp, *signatures = (item.strip() for item in value.split(","))
    given = [s for s in signatures if s]
    if not stamp or not given:
        raise SignatureError(f"{HEADER} is not '<timestamp>,<signature>[,<signature>]'")
    return ",".join([f"t={stamp}", *(f"v1={s}" for s in given)])


def as_recurly(value: str) -> str:
    """The scheme's ``t=…,v1=…`` as Recurly writes it."""
    items = dict(item.split("=", 1) for item in value.split(","))
    return f"{items['t']},{items['v1']}"


def verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    value = request.header(HEADER)
    if value:
        headers = {**request.headers, HEADER: as_listed(value)}
        request = dataclasses.replace(request, headers=headers)
    verdict = scheme_check.verify(SCHEME, request, secrets, tolerance=options.tolerance_seconds)
    if isinstance(verdict, ParsedEvent) and verdict.object_type and verdict.event_type:
        return dataclasses.replace(
            verdict, event_type=f"{verdict.object_type}.{verdict.event_type}"
        )
    return verdict


def sign(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    signed = scheme_check.sign(SCHEME, headers, body, secret, now, url)
    signed[HEADER] = as_recurly(signed[HEADER])
    return signed


def _recurly_id() -> str:
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=12))


def _sample(options: SourceOptions, event_type: str, secret: str) -> Sample:
    object_type, _, event = event_type.partition(".")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    document = {
        "id": _recurly_id(),
        "object_type": object_type,
        "site_id": "r23khg9b5kyb",
        "event_type": event,
        "event_time": now,
        "account_code": f"hookledger-{_recurly_id()[:6]}",
    }
    body = compact_json(document)
    event_id = SCHEME.id_prefix + hashlib.sha256(body).hexdigest()
    return Sample(event_id, body, {"content-type": "application/json"})


SAMPLES = Catalogue(("account.created", "account.updated"), _sample)

PROVIDER = dataclasses.replace(
    declared(
        "recurly",
        SCHEME,
        samples=SAMPLES,
        build=build,
        budget=BUDGET,
        keys=RecurlyKeys,
        validate=rule,
    ),
    verify=verify,
    sign=sign,
)
