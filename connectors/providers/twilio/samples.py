"""Realistic sample Twilio status callbacks for ``hookledger send`` (messages and calls), each with a
fresh SID. Unsigned: ``PROVIDER.sign`` adds ``X-Twilio-Signature``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from email.utils import format_datetime
from urllib.parse import urlencode

from connectors.catalogue import Catalogue, Sample
from connectors.options import SourceOptions


def _twilio(options: SourceOptions, event_type: str, secret: str) -> Sample:
    kind, _, status = event_type.partition(".")
    prefix = "Call" if kind == "call" else "Message"
    sid = ("CA" if prefix == "Call" else "SM") + uuid.uuid4().hex
    fields = {
        "AccountSid": "AC" + uuid.UUID(int=0).hex,
        f"{prefix}Sid": sid,
        f"{prefix}Status": status or "delivered",
        "To": "+15005550006",
        "From": "+15005550001",
        "ApiVersion": "2010-04-01",
    }
    if prefix == "Call":  # a call's status callback says so (an incoming call does not)
        fields |= {
            "CallbackSource": "call-progress-events",
            "SequenceNumber": "0",
            "Timestamp": format_datetime(datetime.now(UTC), usegmt=False),
        }
    body = urlencode(fields).encode()
    headers = {"content-type": "application/x-www-form-urlencoded"}
    return Sample(f"{sid}:{fields[f'{prefix}Status']}", body, headers)


TWILIO = Catalogue(
    (
        "message.delivered",
        "message.sent",
        "message.undelivered",
        "message.failed",
        "call.completed",
    ),
    _twilio,
)
