"""Dropbox webhooks, received (``kind = "dropbox"``): a hex HMAC of the body with the app secret; the
verification request (a GET with ``challenge``) echoed.

Facts (source: Dropbox, "Webhooks", https://www.dropbox.com/developers/reference/webhooks; the
official SDK ``dropbox`` (12.2.5, read) has no webhook helper, so there is no library to cross-check
with):

- Verification: when a webhook URI is added, Dropbox sends ``GET <uri>?challenge=<text>``; the
  endpoint "should respond by echoing back that challenge parameter", with ``Content-Type:
  text/plain`` and ``X-Content-Type-Options: nosniff`` (the echoed text is chosen by whoever calls
  the URL). It is not signed. Answered ``200`` with the challenge as ``text/plain`` (the receiver
  sends every reply a provider asks for with ``nosniff``) and logged as a ``handshake``.
- Notifications: ``POST`` with ``X-Dropbox-Signature``: "the HMAC-SHA256 of the request body, using
  your app secret as the key", hex; the app secret of the App Console, used as is. No timestamp is
  signed: no replay window. Dropbox expects an answer within 10 seconds.
- Body: ``{"list_folder": {"accounts": ["dbid:…", …]}, "delta": {"users": [12345, …]}}``: which
  accounts changed, nothing about what changed (the app calls ``/files/list_folder/continue`` with
  its cursor). No id, no time, and a body names accounts only: two notifications an hour apart for
  the same account are the same bytes, and each asks the app to sync. So each delivery is an event
  of its own: ``dropbox:`` + the SHA-256 of the body + ``:`` + its arrival in milliseconds. A
  notification Dropbox sends again after a failed answer is then one more event, whose handler
  syncs once more (``list_folder/continue`` from the stored cursor is idempotent): an extra sync,
  never a change missed. Type: ``list_folder``; object: the account when it names exactly one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from connectors import scheme_check
from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import keys_of, signer
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.scheme import Scheme
from connectors.webhooks import (
    BadPayload,
    Handshake,
    ParsedEvent,
    Reply,
    Verdict,
    WebhookRequest,
    text_or_none,
)

SIGNATURE = "X-Dropbox-Signature"

SCHEME = Scheme(
    signatures=(f"header:{SIGNATURE}",),
    signed="{body}",
    algorithm="hmac-sha256",
    encoding="hex",
    event_id="hash",
    id_prefix="dropbox:",
    event_type=None,
)


def _challenge(request: WebhookRequest) -> Handshake:
    challenge = request.query_value("challenge")
    if not challenge:
        raise BadPayload("a GET without a challenge parameter (Dropbox's verification sends one)")
    return Handshake(
        Reply(200, challenge.encode("utf-8", "surrogatepass"), "text/plain; charset=utf-8"),
        "verification (challenge)",
    )


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    if request.method.upper() == "GET":
        return _challenge(request)
    verdict = scheme_check.verify(
        SCHEME, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
    )
    if not isinstance(verdict, ParsedEvent):
        return verdict
    document = json.loads(request.body)  # verify has read it: a JSON document
    listing = document.get("list_folder") if isinstance(document, dict) else None
    accounts = listing.get("accounts") if isinstance(listing, dict) else None
    only = text_or_none(accounts[0]) if isinstance(accounts, list) and len(accounts) == 1 else None
    return dataclasses.replace(
        verdict,
        event_id=f"{verdict.event_id}:{int(request.now * 1000)}",  # each delivery: see above
        event_type="list_folder" if listing is not None else None,
        object_type="account" if only else None,
        object_id=only,
    )


# -- samples, shaped after the notification example of the Webhooks reference ---------------------


def _build(options: SourceOptions, event_type: str, secret: str) -> Sample:
    account = "dbid:AA" + token(30)
    user = int(token(8), 16) % 10**9
    body = compact_json({"list_folder": {"accounts": [account]}, "delta": {"users": [user]}})
    # the id's first part: its arrival, the rest, is known when it arrives
    event_id = SCHEME.id_prefix + hashlib.sha256(body).hexdigest()
    return Sample(event_id, body, {"content-type": "application/json"})


SAMPLES = Catalogue(("list_folder",), _build)

PROVIDER = Provider(
    "dropbox",
    verify=_verify,
    sign=signer(SCHEME),
    sensitive_headers=lambda options: SCHEME.header_names(),
    tolerance=SCHEME.tolerance,
    methods=("POST", "GET"),
    scheme=SCHEME,
    samples=SAMPLES,
)

__all__ = ["PROVIDER", "SAMPLES", "SCHEME"]
