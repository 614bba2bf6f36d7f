"""A :class:`connectors.scheme.Scheme` at work: a delivery verified and read as its events, a
challenge answered, a stored delivery signed again. Pure functions of the request and the secrets.

Every signature place is tried and every secret (rotation); comparisons are constant-time; hostile
text (non-ASCII, bad encodings, bodies that are no JSON) is a 401 or a 400 naming what was wrong.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from connectors.parsing import (
    BadPayload,
    ParsedEvent,
    epoch_time,
    form_fields,
    is_form,
    json_path_get,
    load_json,
    required_id,
    text_or_none,
)
from connectors.scheme import Challenge, Place, Scheme, place
from connectors.scheme_crypto import (
    basic_credentials,
    decoded,
    digest,
    encoded,
    public_check,
    unix_time,
)
from connectors.webhooks import (
    Batch,
    BatchItem,
    Handshake,
    Reply,
    SignatureError,
    Verdict,
    WebhookRequest,
    check_timestamp,
)

_MISSING = object()


@dataclass(frozen=True)
class Keys:
    """What a source gives a scheme beyond its signing secrets."""

    public_key: str | None = None  # ed25519 (hex or base64), ecdsa-p256 (base64 DER)
    verify_token: str | None = None  # a challenge's token (Meta's hub.verify_token)


class _View:
    """The request's places, each read once (the body decoded only when a place needs it)."""

    def __init__(self, scheme: Scheme, request: WebhookRequest) -> None:
        self.scheme = scheme
        self.request = request
        self._document: Any = _MISSING
        self.listing: dict[str, str] = {}
        self.candidates: list[str] = []

    @property
    def document(self) -> Any:
        if self._document is _MISSING:
            body = self.request.body
            if is_form(self.request.header("content-type")):
                try:
                    self._document = form_fields(body)
                except ValueError:
                    self._document = None
            else:
                self._document = load_json(body, required=False)
        return self._document

    def read(self, where: Place, item: Any = _MISSING) -> str | None:
        if where.where == "header":
            value = self.request.header(where.name)
        elif where.where == "query":
            value = self.request.query_value(where.name)
        elif where.where == "list":
            value = self.listing.get(where.name)
        else:
            found = json_path_get(self.document if item is _MISSING else item, where.name)
            value = text_or_none(found)
        return value.strip() if isinstance(value, str) else value


def _gather(view: _View) -> str:
    """Every signature candidate the request carries (and the list's other keys); the name of the
    first place, for errors."""
    scheme = view.scheme
    first = ""
    for text in scheme.signatures:
        where = place(text, what="signature")
        first = first or (where.name if where.where == "header" else where.describe())
        value = view.read(where)
        if not value:
            continue
        if scheme.listed is not None:
            for entry in value.split(scheme.listed.separator):
                key, _, found = entry.strip().partition(scheme.listed.pair)
                if key == scheme.listed.key and found:
                    view.candidates.append(found.strip())
                else:
                    view.listing.setdefault(key, found.strip())
        elif not scheme.prefix or value.startswith(scheme.prefix):
            view.candidates.append(value[len(scheme.prefix) :])
    return first


def _message(view: _View, timestamp: str | None) -> bytes:
    out = bytearray()
    request = view.request
    for part in view.scheme.parts:
        if part.field is None:
            out += part.literal.encode()
        elif part.field == "body":
            out += request.body
        elif part.field == "timestamp":
            out += (timestamp or "").encode()
        elif part.field == "url":
            out += request.url.encode()
        elif part.field == "method":
            out += request.method.upper().encode()
        elif part.field == "form":
            out += _form_text(request.body).encode()
        else:
            where = place(view.scheme.event_id, what="id") if part.field == "id" else part.place
            assert where is not None
            value = view.read(where)
            if value is None:
                raise SignatureError(
                    f"the signed message needs {where.describe()}, which is missing"
                )
            out += value.encode("utf-8", "surrogatepass")
    return bytes(out)


def _form_text(body: bytes) -> str:
    try:
        fields = form_fields(body)
    except ValueError:
        raise BadPayload("body is not a readable form") from None
    pairs = sorted(
        (name, value)
        for name, values in fields.items()
        for value in (values if isinstance(values, list) else [values])
    )
    return "".join(name + value for name, value in pairs)


def _matches(scheme: Scheme, message: bytes, given: list[bytes], secret: str) -> bool:
    expected = digest(scheme, secret, message)
    return any(hmac.compare_digest(expected, candidate) for candidate in given)


def check_signature(
    scheme: Scheme,
    request: WebhookRequest,
    secrets: tuple[str, ...],
    keys: Keys,
    *,
    tolerance: int,
) -> _View:
    """The signature checked (and its time), or a SignatureError naming what failed."""
    view = _View(scheme, request)
    first = _gather(view)
    if not view.candidates:
        found = any(view.read(place(t, what="signature")) for t in scheme.signatures)
        if found and scheme.prefix:
            raise SignatureError(f"{first} does not start with {scheme.prefix}")
        if found:
            raise SignatureError(
                f"{first} holds no '{scheme.listed.key if scheme.listed else ''}' signature"
            )
        raise SignatureError(
            f"missing {'header ' if scheme.signatures[0].startswith('header:') else ''}{first}"
        )
    timestamp = None
    if scheme.timestamp:
        where = place(scheme.timestamp, what="timestamp")
        timestamp = view.read(where)
        if not timestamp:
            raise SignatureError(f"missing timestamp ({where.describe()})")
    if scheme.algorithm in ("token", "basic"):
        given_text = [
            basic_credentials(c)
            if scheme.algorithm == "basic"
            else c.encode("utf-8", "surrogatepass")
            for c in view.candidates
        ]
        if not any(hmac.compare_digest(c, s.encode()) for c in given_text for s in secrets):
            raise SignatureError(f"{first} does not match")
    else:
        given = [d for d in (decoded(scheme, c) for c in view.candidates) if d is not None]
        if not given:
            raise SignatureError(f"{first} is not valid {scheme.encoding}")
        message = _message(view, timestamp)
        if scheme.asymmetric:
            ok = bool(keys.public_key) and public_check(
                scheme, message, given, keys.public_key or ""
            )
        else:
            ok = any(_matches(scheme, message, given, secret) for secret in secrets)
        if not ok:
            raise SignatureError(f"{first} does not match")
    if timestamp is not None:
        unix = unix_time(scheme, timestamp, str(scheme.timestamp))
        check_timestamp(unix, request.now, tolerance, reject_future=scheme.reject_future)
    return view


def _challenge(scheme: Scheme, request: WebhookRequest) -> Challenge | None:
    view = _View(scheme, request)
    for challenge in scheme.challenges:
        if challenge.method and request.method.upper() != challenge.method:
            continue
        where, value = challenge.marker
        if view.read(where) == value:
            return challenge
    return None


def _answer(scheme: Scheme, challenge: Challenge, request: WebhookRequest, keys: Keys) -> Handshake:
    view = _View(scheme, request)
    if challenge.token:
        given = view.read(place(challenge.token, what="token")) or ""
        expected = keys.verify_token or ""
        if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
            raise SignatureError(f"{challenge.token} is not the configured verify token")
    echoed = view.read(place(challenge.echo, what="echo"))
    if echoed is None:
        raise BadPayload(f"the handshake has no {challenge.echo}")
    if challenge.json_key:
        body = json.dumps({challenge.json_key: echoed}).encode()
        return Handshake(Reply(200, body, "application/json"), f"challenge ({challenge.when})")
    return Handshake(Reply(200, echoed.encode()), f"challenge ({challenge.when})")


def verify(
    scheme: Scheme,
    request: WebhookRequest,
    secrets: tuple[str, ...],
    keys: Keys = Keys(),
    *,
    tolerance: int | None = None,
) -> Verdict:
    """The delivery verified and read (an event, a batch of events, or a handshake answered)."""
    window = scheme.tolerance if tolerance is None else tolerance
    challenge = _challenge(scheme, request)
    if challenge is not None:
        if challenge.signed:
            check_signature(scheme, request, secrets, keys, tolerance=window)
        return _answer(scheme, challenge, request, keys)
    view = check_signature(scheme, request, secrets, keys, tolerance=window)
    return read_events(scheme, view)


def read_events(scheme: Scheme, view: _View) -> Verdict:
    document = view.document if _reads_body(scheme) else None
    if document is None and _reads_body(scheme):  # say why this body holds no document
        load_json(view.request.body, required=True)
        raise BadPayload("body is not a JSON document or a form")
    if scheme.events is None:
        return _event(scheme, view, _MISSING, view.request.body)
    items = document if scheme.events == "$" else json_path_get(document, scheme.events)
    if not isinstance(items, list):
        raise BadPayload(f"body has no list of events at '{scheme.events}'")
    if not items:
        return Handshake(Reply(200), "a delivery with no events")
    batch = []
    for item in items:
        body = json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode(
            "utf-8", "surrogatepass"
        )
        event = _event(scheme, view, item, body)
        batch.append(BatchItem(event, body))
    return Batch(tuple(batch))


def batch_of_one(scheme: Scheme, item: bytes) -> bytes:
    """One stored item of a batch as a delivery of its own: the list at ``scheme.events`` holding
    it alone (``$``: the body is the list)."""
    assert scheme.events is not None
    document: Any = [json.loads(item)]
    if scheme.events != "$":
        for step in reversed(scheme.events.split(".")):
            document = {step: document}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def _reads_body(scheme: Scheme) -> bool:
    """Whether the event's identity is read from the body's document (else headers or a hash)."""
    if scheme.events:
        return True
    places = (scheme.event_type, scheme.occurred_at, scheme.object_id, scheme.object_type)
    return scheme.event_id.startswith("body:") or any(p and p.startswith("body:") for p in places)


def _event(scheme: Scheme, view: _View, item: Any, body: bytes) -> ParsedEvent:
    def value(text: str | None) -> str | None:
        return view.read(place(text, what="identity"), item) if text else None

    where = place(scheme.event_id, what="event_id", hash_allowed=True)
    if where.where == "hash":
        event_id = scheme.id_prefix + hashlib.sha256(body).hexdigest()
    else:
        event_id = required_id(view.read(where, item), where.describe())
    return ParsedEvent(
        event_id=event_id,
        delivery_id=value(scheme.delivery_id),
        event_type=value(scheme.event_type),
        object_type=value(scheme.object_type),
        object_id=value(scheme.object_id),
        occurred_at=_moment(value(scheme.occurred_at)),
    )


def _moment(text: str | None) -> datetime | None:
    if text is None:
        return None
    if text.isascii() and text.isdigit() and len(text) >= 12:  # milliseconds since 1970
        return epoch_time(int(text) // 1000)
    return epoch_time(text)


def sign(
    scheme: Scheme,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
    method: str = "POST",
) -> dict[str, str]:
    """The headers a delivery is sent with, signed afresh as the provider would (``hookledger
    send`` and ``drill``). Only for a scheme whose signature and time are in headers and whose
    key is a shared secret (:func:`can_sign`)."""
    if not can_sign(scheme):
        raise ValueError("this scheme cannot be signed with a shared secret")
    out = {"content-type": headers.get("content-type") or "application/json"}
    out.update({h.lower(): headers[h.lower()] for h in scheme.carried if headers.get(h.lower())})
    timestamp = None
    stamp_place = place(scheme.timestamp, what="timestamp") if scheme.timestamp else None
    if stamp_place is not None:
        timestamp = _stamp(scheme, now)
        if stamp_place.where == "header":
            out[stamp_place.name.lower()] = timestamp
    request = WebhookRequest(method, url, {**headers, **out}, body, now)
    target = place(scheme.signatures[0], what="signature").name.lower()
    if scheme.algorithm == "token":
        out[target] = secret
        return out
    if scheme.algorithm == "basic":
        out[target] = scheme.prefix + base64.b64encode(secret.encode()).decode()
        return out
    view = _View(scheme, request)
    if stamp_place is not None and stamp_place.where == "list":
        view.listing[stamp_place.name] = timestamp or ""
    message = _message(view, timestamp)
    text = encoded(scheme, digest(scheme, secret, message))
    if scheme.listed is None:
        out[target] = scheme.prefix + text
        return out
    listed = scheme.listed
    entries = [f"{listed.key}{listed.pair}{text}"]
    if stamp_place is not None and stamp_place.where == "list":
        entries.insert(0, f"{stamp_place.name}{listed.pair}{timestamp}")
    out[target] = listed.separator.join(entries)
    return out


def _stamp(scheme: Scheme, now: float) -> str:
    if scheme.time_format == "iso":
        return datetime.fromtimestamp(int(now), UTC).isoformat().replace("+00:00", "Z")
    return str(int(now * 1000)) if scheme.time_format == "unix_ms" else str(int(now))


def can_sign(scheme: Scheme) -> bool:
    """Whether hookledger can sign a delivery of this scheme: a shared secret, the signature and its
    time in headers."""
    if scheme.asymmetric:
        return False
    if place(scheme.signatures[0], what="signature").where != "header":
        return False
    return not scheme.timestamp or place(scheme.timestamp, what="t").where in ("header", "list")
