"""Twilio's webhooks and status callbacks, received (``kind = "twilio"``): a provider that signs the
URL it called, which is why a provider is given the whole request (``connectors.webhooks``).

Facts (docs/providers.md "Twilio", with sources):

- ``X-Twilio-Signature`` is the base64 HMAC-SHA1, keyed with the account's auth token, of the full URL
  Twilio called (query included) followed by each POST parameter, sorted by name, as name + value
  (twilio's ``RequestValidator.compute_signature``; values of a repeated name sorted too). Where a
  Webhooks Rule applies, ``X-Twilio-Webhooks-Signature-Settings: key=…,algorithm=HMAC_SHA256`` names
  another algorithm, keyed with that rule's SharedKey secret.
- A JSON body is signed through the URL: its SHA-256 (hex) is the ``bodySHA256`` query parameter and
  the signature covers the URL alone.
- Twilio's own validator accepts the URL with and without the default port ("since sig generation on
  back end is inconsistent"); so does this.
- A status callback names its resource and the status it reached (``MessageSid`` + ``MessageStatus``,
  ``CallSid`` + ``CallStatus``, …): that pair is the event's identity, so Twilio's retry of a callback
  is a duplicate and each new status its own event.
- The answer: an incoming message or call (and a TwiML verb's ``action``) expects TwiML, and JSON
  there is Twilio's error 12300 (Invalid Content-Type), so it gets an empty ``<Response/>`` (do
  nothing now; the handler acts later through the REST API); a status callback
  (``MessageStatus``, ``CallbackSource``, ``RecordingStatus``, ``TranscriptionStatus``,
  ``StatusCallbackEvent``) and a JSON body get an empty 200 (docs/providers.md "Twilio").

The receiver must know the URL Twilio called: behind a proxy, set ``[receiver] public_url``.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from connectors.errors import UnsupportedError
from connectors.options import SourceOptions
from connectors.provider import Provider, headers_named
from connectors.providers.twilio import api as twilio_api
from connectors.providers.twilio.samples import TWILIO as SAMPLES
from connectors.webhooks import (
    BadPayload,
    ParsedEvent,
    Received,
    Reply,
    SignatureError,
    Verdict,
    WebhookRequest,
    form_fields,
    hmac_digest,
    is_form,
    load_json,
    require_header,
    required_id,
    same_digest,
    text_or_none,
)

SIGNATURE = "X-Twilio-Signature"
SETTINGS = "X-Twilio-Webhooks-Signature-Settings"
ALGORITHMS = {"HMAC_SHA1": "sha1", "HMAC_SHA256": "sha256"}
# (the resource's id field, its status field, the object type): the first present names the event
RESOURCES = (
    ("MessageSid", "MessageStatus", "message"),
    ("MessageSid", "SmsStatus", "message"),
    ("SmsSid", "SmsStatus", "message"),  # the older name of a message's id
    ("CallSid", "CallStatus", "call"),
    ("RecordingSid", "RecordingStatus", "recording"),
    ("TranscriptionSid", "TranscriptionStatus", "transcription"),
    ("ConferenceSid", "StatusCallbackEvent", "conference"),
)

# A JSON body's id where it has no id/sid: the resource SIDs Twilio's callbacks carry (Messaging's
# webhook request, Voice's webhooks, <Record>'s transcribeCallback, a conference's statusCallback)
JSON_SIDS = (
    "MessageSid",
    "SmsSid",
    "SmsMessageSid",
    "CallSid",
    "RecordingSid",
    "TranscriptionSid",
    "ConferenceSid",
)
# Present only in a status callback, which takes no TwiML: a message's delivery status, a call's
# progress events (always "call-progress-events"), a recording's, a transcription's, a conference's
STATUS_FIELDS = (
    "MessageStatus",
    "CallbackSource",
    "RecordingStatus",
    "TranscriptionStatus",
    "StatusCallbackEvent",
)
TWIML = Reply(200, b'<?xml version="1.0" encoding="UTF-8"?><Response/>', "text/xml")
EMPTY = Reply(200, b"")


def twilio_sign(
    url: str, params: Mapping[str, Any], secret: str, algorithm: str = "HMAC_SHA1"
) -> str:
    """The ``X-Twilio-Signature`` Twilio would send for these form parameters (a value may be a
    list of the values of a repeated name)."""
    text = url
    for name in sorted(params):
        values = params[name] if isinstance(params[name], list) else [params[name]]
        for value in sorted(set(values)):
            text += name + value
    digest = hmac_digest(secret.encode(), text.encode(), ALGORITHMS[algorithm])
    return base64.b64encode(digest).decode()


def _with_and_without_port(url: str) -> tuple[str, ...]:
    parts = urlsplit(url)
    if parts.port is not None:
        return (url, urlunsplit(parts._replace(netloc=parts.netloc.rsplit(":", 1)[0])))
    port = 443 if parts.scheme == "https" else 80
    return (url, urlunsplit(parts._replace(netloc=f"{parts.netloc}:{port}")))


def _algorithm(headers: Mapping[str, str]) -> str:
    for part in (headers.get(SETTINGS.lower()) or "").split(","):
        name, sep, value = part.partition("=")
        if sep and name.strip() == "algorithm" and value.strip():
            algorithm = value.strip().upper()
            if algorithm not in ALGORITHMS:
                raise SignatureError(f"{SETTINGS} names an unknown algorithm {value.strip()!r}")
            return algorithm
    return "HMAC_SHA1"


def verify_twilio(
    url: str, headers: Mapping[str, str], body: bytes, secrets: Iterable[str]
) -> None:
    """Twilio's signature over the URL it called (and the form's parameters, or the body's hash)."""
    given = require_header(headers, SIGNATURE)
    algorithm = _algorithm(headers)
    body_hash = parse_qs(urlsplit(url).query).get("bodySHA256")
    params: dict[str, Any] = {}
    if body_hash:
        if not same_digest(hashlib.sha256(body).hexdigest(), body_hash[0]):
            raise SignatureError("the body's SHA-256 is not the URL's bodySHA256")
    elif is_form(headers.get("content-type")):
        try:
            params = form_fields(body)
        except ValueError:
            raise BadPayload("the form body is not readable (UTF-8 fields)") from None
    for secret in secrets:
        for candidate in _with_and_without_port(url):
            if same_digest(twilio_sign(candidate, params, secret, algorithm), given):
                return
    raise SignatureError(
        f"{SIGNATURE} does not match (the URL signed must be the one Twilio called: "
        "behind a proxy, set [receiver] public_url)"
    )


def _by_resource(fields: Mapping[str, Any]) -> ParsedEvent | None:
    """The first resource and status the fields name, as the event."""
    for sid_field, status_field, object_type in RESOURCES:
        sid = text_or_none(fields.get(sid_field))
        status = text_or_none(fields.get(status_field))
        if sid and status:
            return ParsedEvent(
                event_id=required_id(f"{sid}:{status}", f"{sid_field} and {status_field}"),
                event_type=f"{object_type}.{status}",
                object_type=object_type,
                object_id=sid,
            )
    return None


def parse_twilio(headers: Mapping[str, str], body: bytes) -> ParsedEvent:
    if is_form(headers.get("content-type")):
        try:
            fields = form_fields(body)
        except ValueError:
            raise BadPayload("the form body is not readable (UTF-8 fields)") from None
        named = _by_resource(fields)
        if named is not None:
            return named
        raise BadPayload(
            "a Twilio form names no resource and status (MessageSid and MessageStatus, CallSid and "
            "CallStatus, …)"
        )
    document = load_json(body, required=True)
    if not isinstance(document, dict):
        raise BadPayload("body is not a JSON object")
    own = text_or_none(document.get("id")) or text_or_none(document.get("sid"))
    if not own:
        named = _by_resource(document)  # named as its form would be
        if named is not None:
            return named
        own = next(filter(None, (text_or_none(document.get(n)) for n in JSON_SIDS)), None)
    return ParsedEvent(
        event_id=required_id(own, "id, sid or a resource SID such as MessageSid"),
        event_type=text_or_none(document.get("type")),
    )


def answer(headers: Mapping[str, str], body: bytes) -> Reply:
    """What Twilio expects back from a verified callback: TwiML from an incoming message or call,
    an empty 200 from a status callback or a JSON body."""
    if not is_form(headers.get("content-type")):
        return EMPTY
    fields = form_fields(body)
    return EMPTY if any(fields.get(name) for name in STATUS_FIELDS) else TWIML


def _verify(options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]) -> Verdict:
    verify_twilio(request.url, request.headers, request.body, secrets)
    event = parse_twilio(request.headers, request.body)
    return Received(event, answer(request.headers, request.body))


def _sign(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    """A stored callback signed afresh for the URL it is sent to (the drill's target)."""
    content_type = headers.get("content-type") or "application/x-www-form-urlencoded"
    if not is_form(content_type):
        raise UnsupportedError(
            "a JSON-bodied Twilio callback cannot be re-signed: its body's hash travels in the URL "
            "Twilio called (bodySHA256), which is not the drill's"
        )
    return {
        "content-type": content_type,
        SIGNATURE.lower(): twilio_sign(url, form_fields(body), secret),
    }


PROVIDER = Provider(
    "twilio",
    samples=SAMPLES,
    verify=_verify,
    build=twilio_api.build,
    keys=twilio_api.TwilioKeys,
    validate=twilio_api.rule,
    as_delivery=twilio_api.as_callback,
    sign=_sign,
    sensitive_headers=headers_named(SIGNATURE),
    # phone numbers (Voice also names them Caller and Called) and message text: in callbacks'
    # form fields and the API's lower-case keys alike
    personal_fields=("From", "To", "Body", "Caller", "Called"),
)
