"""Braintree's signed notification: ``bt_signature`` checked over ``bt_payload``, the payload's XML
read within bounds. Pure functions, shared by the verifier and the samples."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import xml.etree.ElementTree as ET  # no DTD reaches it: see read_xml
from collections.abc import Sequence
from dataclasses import dataclass

from connectors.parsing import BadPayload, iso_time, required_id
from connectors.webhooks import ParsedEvent, SignatureError

ID_PREFIX = "braintree:"
MAX_XML = 1 << 20  # 1 MiB of XML: a notification is a few KiB
# the characters of a bt_payload (the library refuses others: "payload contains illegal characters")
_PAYLOAD = re.compile(r"[A-Za-z0-9+=/\n]+")
_DTD = re.compile(rb"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)


def digest(private_key: str, message: bytes) -> str:
    """Braintree's ``Crypto.sha1_hmac_hash``: hex HMAC-SHA1 keyed with the SHA-1 of the private key."""
    key = hashlib.sha1(private_key.encode()).digest()
    return hmac.new(key, message, hashlib.sha1).hexdigest()


def signature(public_key: str, private_key: str, payload: str) -> str:
    """The ``bt_signature`` Braintree sends for ``payload``: ``public_key|digest``."""
    return f"{public_key}|{digest(private_key, payload.encode())}"


def challenge_answer(public_key: str, private_key: str, challenge: str) -> str:
    """``WebhookNotificationGateway.verify``: the answer to a ``bt_challenge``."""
    return f"{public_key}|{digest(private_key, challenge.encode())}"


def check(bt_signature: str, bt_payload: str, public_key: str, secrets: Sequence[str]) -> None:
    """The signature is the configured public key's and matches one private key (rotation), or a
    SignatureError. As the library: pairs ``public_key|hex`` joined by ``&``; the payload as sent,
    or with a trailing newline."""
    if not bt_signature or not bt_payload:
        raise SignatureError("bt_signature and bt_payload are both required")
    if not _PAYLOAD.fullmatch(bt_payload):
        raise SignatureError("bt_payload holds characters base64 does not have")
    given = [
        hexdigest
        for key, _, hexdigest in (pair.partition("|") for pair in bt_signature.split("&"))
        if hexdigest and hmac.compare_digest(key.encode(), public_key.encode())
    ]
    if not given:
        raise SignatureError("bt_signature has no signature for the configured public_key")
    payload = bt_payload.encode()
    for private_key in secrets:
        for message in (payload, payload + b"\n"):
            expected = digest(private_key, message)
            if any(s.isascii() and hmac.compare_digest(expected, s) for s in given):
                return
    raise SignatureError("bt_signature does not match bt_payload")


def read_xml(bt_payload: str) -> bytes:
    """The payload's XML, refused (400) when it is no base64, too long, or carries a DTD."""
    try:
        xml = base64.b64decode(bt_payload.replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        raise BadPayload("bt_payload is not base64") from None
    if len(xml) > MAX_XML:
        raise BadPayload(f"the notification is longer than {MAX_XML} bytes")
    if _DTD.search(xml):
        # no DTD, so no entity can be declared, expanded or fetched (ElementTree has no switch
        # for that, and defusedxml is not a dependency)
        raise BadPayload("the notification carries a DTD, which Braintree's never do")
    return xml


@dataclass(frozen=True)
class Notification:
    kind: str
    timestamp: str | None
    subject_type: str | None
    subject_id: str | None


def parse(xml: bytes) -> Notification:
    try:
        root = ET.fromstring(xml)  # bounded, DTD refused: read_xml
    except ET.ParseError:
        raise BadPayload("the notification is not well-formed XML") from None
    if root.tag != "notification":
        raise BadPayload(f"the payload is a <{root.tag[:64]}>, not a <notification>")
    kind = (root.findtext("kind") or "").strip()
    if not kind:
        raise BadPayload("the notification has no <kind>")
    subject = root.find("subject")
    inner = next(iter(subject), None) if subject is not None else None
    subject_id = None
    if inner is not None:
        subject_id = (inner.findtext("id") or "").strip() or None
    return Notification(
        kind=kind,
        timestamp=(root.findtext("timestamp") or "").strip() or None,
        subject_type=inner.tag if inner is not None else None,
        subject_id=subject_id,
    )


def event_of(xml: bytes) -> ParsedEvent:
    """The notification's identity: Braintree sends no id, so the SHA-256 of its XML."""
    notification = parse(xml)
    return ParsedEvent(
        event_id=required_id(ID_PREFIX + hashlib.sha256(xml).hexdigest(), "notification"),
        event_type=notification.kind,
        object_type=notification.subject_type,
        object_id=notification.subject_id,
        occurred_at=iso_time(notification.timestamp),
    )
