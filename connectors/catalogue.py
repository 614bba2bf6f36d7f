"""What a provider's sample deliveries are (``hookledger send``): a :class:`Sample` and the
:class:`Catalogue` of the event types it comes in, with the small helpers every catalogue uses."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connectors.options import SourceOptions


@dataclass(frozen=True)
class Sample:
    event_id: str
    body: bytes
    headers: dict[str, str]  # the provider's own, lower-case; the signature is added by its sign


@dataclass(frozen=True)
class Catalogue:
    """The event types a provider's samples come in (the first is the default) and the builder:
    (options, event type, the source's signing secret) -> a delivery."""

    types: tuple[str, ...]
    build: Callable[[SourceOptions, str, str], Sample]

    def sample(self, options: SourceOptions, event_type: str | None, secret: str) -> Sample:
        return self.build(options, event_type or self.types[0], secret)


def compact_json(document: Any) -> bytes:
    """A document as a provider sends it: compact JSON."""
    return json.dumps(document, separators=(",", ":")).encode()


def token(n: int = 24) -> str:
    """A fresh random id fragment, so every sample sent is a new event."""
    return uuid.uuid4().hex[:n]
