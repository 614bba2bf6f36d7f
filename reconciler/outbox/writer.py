"""Writing outgoing messages into the outbox, in the caller's transaction: the message exists if and
only if the change that caused it commits (the transactional outbox).

Inside a handler, ``event.outbox.add(target, payload, key=None, headers=None)`` writes into the
transaction that marks the event processed; its key defaults to one derived from the event and the
target, so a replayed event (or a handler run again after a crash) writes no second message.
Application code outside handlers calls :func:`add_message` with its own SQLAlchemy connection.

Every argument is checked before anything is written (:func:`message`, pure): a bad one raises
:class:`InvalidMessage` (a ``ValueError``: in a handler, a permanent failure), a target that is not
configured raises :class:`~reconciler.errors.ConfigError` (transient: fixing the configuration and
restarting lets the retry through).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from reconciler.correlation import mint, usable
from reconciler.errors import ConfigError
from reconciler.storage.dialect import dialect_insert, name_of
from reconciler.storage.models import OUTBOX, OutboxStatus
from reconciler.storage.types import utcnow

MAX_KEY = 255  # outbox.key
MAX_OBJECT_KEY = 400  # outbox.object_key
MAX_HEADERS = 32
MAX_HEADER_VALUE = 4096
DEFAULT_MAX_PAYLOAD = 1_048_576
# Headers the publisher sets itself (the key, the correlation id, the signature, the transport's
# own), or that carry secrets, which come from the configuration and never from a stored row.
RESERVED_HEADERS = frozenset(
    {
        "idempotency-key",
        "x-correlation-id",
        "authorization",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "content-length",
        "transfer-encoding",
        "host",
        "connection",
        "user-agent",
    }
)
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}")  # an RFC 9110 token
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TARGET = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class InvalidMessage(ValueError):
    """An outgoing message's argument is not usable."""


@dataclass(frozen=True)
class Message:
    """A checked outgoing message, ready to be stored."""

    target: str
    key: str
    payload: bytes
    content_type: str
    headers: dict[str, str]
    correlation_id: str
    source: str | None = None
    event_id: str | None = None
    object_key: str | None = None


def _header_safe(value: str) -> bool:
    """Printable ASCII: what an HTTP header value (Idempotency-Key, webhook-id) can carry as is."""
    return value.isascii() and value.isprintable()


def event_key(source: str, event_id: str, target: str) -> str:
    """The default key of a handler's message: the same for every run of the same event, so a
    replay writes no second message. Too long for the column or not plain ASCII, the event id is
    hashed."""
    key = f"{source}:{event_id}:{target}"
    if len(key) <= MAX_KEY and _header_safe(key):
        return key
    return f"{source}:sha256:{hashlib.sha256(event_id.encode()).hexdigest()}:{target}"


def encode_payload(payload: Any) -> tuple[bytes, str]:
    """The body and its default content type: a mapping or list as compact JSON, text as UTF-8,
    bytes as they are."""
    if isinstance(payload, bytes | bytearray | memoryview):
        return bytes(payload), "application/octet-stream"
    if isinstance(payload, str):
        return payload.encode("utf-8"), "text/plain; charset=utf-8"
    if isinstance(payload, Mapping | list | tuple):
        try:
            text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidMessage(f"payload is not JSON-serialisable: {exc}") from None
        return text.encode("utf-8"), "application/json"
    raise InvalidMessage(
        f"payload must be a dict, a list, str or bytes, not {type(payload).__name__}"
    )


def _text(name: str, value: Any, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidMessage(f"{name} must be a string, not {type(value).__name__}")
    if not value.strip() or len(value) > limit or _CONTROL.search(value):
        shown = json.dumps(value[:80])
        raise InvalidMessage(
            f"{name} {shown} must be 1-{limit} characters without control characters"
        )
    return value


def check_headers(headers: Mapping[str, Any] | None) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise InvalidMessage(f"headers must be a mapping, not {type(headers).__name__}")
    if len(headers) > MAX_HEADERS:
        raise InvalidMessage(f"headers: at most {MAX_HEADERS}, not {len(headers)}")
    out: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise InvalidMessage(f"header name {json.dumps(str(name)[:80])} is not a token")
        if name.lower() in RESERVED_HEADERS:
            raise InvalidMessage(
                f"header '{name}' is set by the publisher (or comes from the target's "
                "configuration); it cannot be given"
            )
        if name.lower() in {n.lower() for n in out}:
            raise InvalidMessage(f"header '{name}' is given twice")
        out[name] = _text(f"header '{name}'", value, MAX_HEADER_VALUE)
    return out


def message(
    target: str,
    payload: Any,
    *,
    key: str | None = None,
    headers: Mapping[str, Any] | None = None,
    correlation_id: str | None = None,
    source: str | None = None,
    event_id: str | None = None,
    object_key: str | None = None,
    targets: Collection[str] | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD,
) -> Message:
    """Check every argument of an outgoing message and return it as a value (pure)."""
    if not isinstance(target, str) or not _TARGET.fullmatch(target):
        raise InvalidMessage(f"target {json.dumps(str(target)[:80])} is not a target name")
    if targets is not None and target not in targets:
        known = ", ".join(sorted(targets)) or "none"
        raise ConfigError(
            f"outbox target '{target}' is not configured in [[outbox.targets]] (configured: {known})"
        )
    if key is None:
        if source is None or event_id is None:
            raise InvalidMessage("key is required outside a handler")
        key = event_key(source, event_id, target)
    key = _text("key", key, MAX_KEY)
    if not _header_safe(key):
        shown = json.dumps(key[:80])
        raise InvalidMessage(
            f"key {shown} must be printable ASCII: it is sent as the Idempotency-Key header"
        )
    body, content_type = encode_payload(payload)
    if len(body) > max_payload_bytes:
        raise InvalidMessage(
            f"payload is {len(body):,} bytes, over [outbox] max_payload_bytes ({max_payload_bytes:,})"
        )
    checked = check_headers(headers)
    for name in list(checked):
        if name.lower() == "content-type":
            content_type = checked.pop(name)
    if correlation_id is None:
        correlation_id = mint()
    elif usable(correlation_id) != correlation_id:
        raise InvalidMessage(
            f"correlation_id {json.dumps(str(correlation_id)[:80])} is not a token of at most "
            "64 characters"
        )
    if object_key is not None:
        object_key = _text("object key", object_key, MAX_OBJECT_KEY)
    return Message(
        target=target,
        key=key,
        payload=body,
        content_type=content_type,
        headers=checked,
        correlation_id=correlation_id,
        source=source,
        event_id=event_id,
        object_key=object_key,
    )


@functools.cache
def _insert(dialect: str) -> Any:
    """Insert-if-new, its values from the parameters, built once per dialect (a statement built per
    call spends most of its time in SQLAlchemy's coercion and cache-key code); RETURNING says
    exactly whether it inserted on both databases (rowcount does not)."""
    table_insert = dialect_insert(dialect, OUTBOX)
    return table_insert.on_conflict_do_nothing(index_elements=["target", "key"]).returning(
        OUTBOX.c.id
    )


def insert_message(conn: Connection, msg: Message, now: datetime | None = None) -> bool:
    """Store the message unless its target already has its key (one statement: ``INSERT ... ON
    CONFLICT (target, key) DO NOTHING``). True when it was new."""
    at = now or utcnow()
    values = {
        "target": msg.target,
        "key": msg.key,
        "payload": msg.payload,
        "content_type": msg.content_type,
        "headers": msg.headers,
        "status": OutboxStatus.PENDING,
        "attempts": 0,
        "next_attempt_at": at,
        "correlation_id": msg.correlation_id,
        "source": msg.source,
        "event_id": msg.event_id,
        "object_key": msg.object_key,
        "created_at": at,
        "queued_at": at,
    }
    return conn.execute(_insert(name_of(conn)), values).first() is not None


def add_message(
    conn: Connection,
    target: str,
    payload: Any,
    *,
    key: str | None = None,
    headers: Mapping[str, Any] | None = None,
    correlation_id: str | None = None,
    object_key: str | None = None,
    targets: Collection[str] | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD,
) -> str:
    """Write an outgoing message in ``conn``'s transaction, for application code outside handlers::

        with engine.begin() as conn:  # the hookledger database
            conn.execute(insert(orders).values(...))
            add_message(conn, "crm", {"order": 42}, key="order-42-created")

    Both commit, or neither. ``key`` is the Idempotency-Key the target receives on every attempt;
    writing the same key to the same target again writes nothing (derive it from your record to make
    a re-run harmless; without one a new key is made, so each call is a new message). ``targets``:
    the configured names, to refuse an unknown target now rather than leave the message unsent.
    Returns the key."""
    msg = message(
        target,
        payload,
        key=uuid.uuid4().hex if key is None else key,
        headers=headers,
        correlation_id=correlation_id,
        object_key=object_key,
        targets=targets,
        max_payload_bytes=max_payload_bytes,
    )
    insert_message(conn, msg)
    return msg.key


Write = Callable[[Message], bool]


class Outbox:
    """``event.outbox`` in a handler: messages written with the handler's transaction.

    Built by the worker (and the drill) for one attempt at one event; ``write`` stores a checked
    message in that attempt's transaction."""

    def __init__(
        self,
        write: Write,
        *,
        source: str,
        event_id: str,
        correlation_id: str,
        object_key: str | None,
        targets: Collection[str] | None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD,
    ) -> None:
        self._write = write
        self._source, self._event_id = source, event_id
        self._correlation_id = correlation_id
        self._object_key = object_key
        self._targets = targets
        self._max_payload = max_payload_bytes
        self._added: dict[tuple[str, str], bytes] = {}

    def add(
        self,
        target: str,
        payload: Any,
        key: str | None = None,
        headers: Mapping[str, Any] | None = None,
        *,
        object_id: str | None = None,
    ) -> str:
        """Send ``payload`` to ``target`` once this event's transaction commits; returns the key.

        ``key`` defaults to ``<source>:<event_id>:<target>``: give each further message to the same
        target for this event a key of its own. ``object_id`` orders messages on a target with
        ``order_by_object`` (default: the event's object)."""
        msg = message(
            target,
            payload,
            key=key,
            headers=headers,
            correlation_id=self._correlation_id,
            source=self._source,
            event_id=self._event_id,
            object_key=object_id if object_id is not None else self._object_key,
            targets=self._targets,
            max_payload_bytes=self._max_payload,
        )
        seen = self._added.get((msg.target, msg.key))
        if seen is not None and seen != msg.payload:
            raise InvalidMessage(
                f"a second message to '{target}' with key '{msg.key}' and another payload: "
                "give it a key of its own"
            )
        self._added[(msg.target, msg.key)] = msg.payload
        self._write(msg)
        return msg.key
