"""Standard Webhooks (https://www.standardwebhooks.com), received (``kind = "standard"``): signed as
the spec says (``connectors.providers.standard.signature``), the ``svix-*`` header names accepted as
well; a sender's list API, where it has one, is read as a generic JSON list
(``connectors.json_list``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from connectors.json_list import ListKeys, _build, _list_rule
from connectors.options import SourceOptions
from connectors.parsing import ParsedEvent
from connectors.provider import Provider, headers_named, timed_scheme
from connectors.providers.standard.samples import STANDARD as STANDARD_SAMPLES
from connectors.providers.standard.signature import parse_standard, standard_sign, verify_standard
from connectors.webhooks import WebhookRequest


def _sign_standard(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    msg_id = standard_headers(headers).get("webhook-id") or ""
    return {
        "content-type": headers.get("content-type") or "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now)),
        "webhook-signature": standard_sign(body, secret, msg_id, int(now)),
    }


SVIX_NAMES = {
    "svix-id": "webhook-id",
    "svix-timestamp": "webhook-timestamp",
    "svix-signature": "webhook-signature",
}


def standard_headers(headers: Mapping[str, str]) -> Mapping[str, str]:
    """Senders built on Svix (Clerk, Resend, …) send the same scheme as ``svix-id``,
    ``svix-timestamp`` and ``svix-signature``; the ``svix`` library accepts either set, and so does
    this (the ``webhook-*`` names win when both are sent)."""
    if "webhook-id" in headers or "svix-id" not in headers:
        return headers
    return {**headers, **{new: headers[old] for old, new in SVIX_NAMES.items() if old in headers}}


_verify_standard_names = timed_scheme(verify_standard, parse_standard)


def _verify_standard(
    options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]
) -> ParsedEvent:
    named = dataclasses.replace(request, headers=standard_headers(request.headers))
    verdict = _verify_standard_names(options, named, secrets)
    assert isinstance(verdict, ParsedEvent)  # (a Standard Webhooks delivery is always an event)
    return verdict


# Standard Webhooks (https://www.standardwebhooks.com): signed as the spec says; a sender's list
# API, where it has one, is read as a generic list.
STANDARD = Provider(
    "standard",
    samples=STANDARD_SAMPLES,
    verify=_verify_standard,
    build=_build,
    keys=ListKeys,
    validate=_list_rule,
    sign=_sign_standard,
    sensitive_headers=headers_named("webhook-signature", "svix-signature"),
)
