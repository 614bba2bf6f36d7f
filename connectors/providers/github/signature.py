"""GitHub's webhook signature and identity: pure functions from (headers, raw body, secrets) to a
verdict, and the event a verified delivery holds.

``X-Hub-Signature-256`` signs the raw bytes, so verification happens before any parsing. Each
configured secret is tried (rotation) and each comparison is constant-time. Identity: the
``X-GitHub-Delivery`` header. Facts and test vectors: ``docs/providers.md`` and
``tests/fixtures/providers/``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from connectors.parsing import (
    BadPayload,
    ParsedEvent,
    _form_json,
    form_fields,
    is_form,
    iso_time,
    json_object,
    required_id,
    text_or_none,
)
from connectors.webhooks import SignatureError, hmac_digest, require_header, same_digest

Headers = Mapping[str, str]  # keys lower-cased


def github_sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac_digest(secret.encode(), body).hex()


def verify_github(headers: Headers, body: bytes, secrets: Iterable[str]) -> None:
    """``X-Hub-Signature-256: sha256=<hex>`` over the raw body. No timestamp is signed."""
    header = require_header(headers, "X-Hub-Signature-256")
    if not header.startswith("sha256="):
        raise SignatureError("X-Hub-Signature-256 does not start with sha256=")
    given = header[len("sha256=") :]
    for secret in secrets:
        if same_digest(hmac_digest(secret.encode(), body).hex(), given):
            return
    raise SignatureError("X-Hub-Signature-256 does not match")


def parse_github(headers: Mapping[str, str], body: bytes) -> ParsedEvent:
    guid = required_id(headers.get("x-github-delivery"), "header X-GitHub-Delivery")
    event = headers.get("x-github-event")
    # a hook set to the form content type sends ``payload=<the same JSON>``
    if is_form(headers.get("content-type")):
        try:
            doc = _form_json(form_fields(body))
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise BadPayload("form body without a payload field holding a JSON object")
    else:
        doc = json_object(body)
    action = text_or_none(doc.get("action"))
    obj = doc.get(event) if event else None
    object_id = text_or_none(obj.get("id")) if isinstance(obj, dict) else None
    if object_id is None and isinstance(doc.get("repository"), dict):
        object_id = text_or_none(doc["repository"].get("id"))
    return ParsedEvent(
        event_id=guid,
        delivery_id=guid,
        event_type=f"{event}.{action}" if event and action else event,
        object_type=event,
        object_id=object_id,
        occurred_at=iso_time(
            text_or_none(obj.get("updated_at")) if isinstance(obj, dict) else None
        ),
    )
