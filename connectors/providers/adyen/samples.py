"""Realistic sample Adyen notifications for ``hookledger send``, each with a fresh ``pspReference``.
Adyen signs inside each item, so the sample is signed here with the source's HMAC key.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.options import SourceOptions
from connectors.providers.adyen.signature import adyen_sign


def _json(document: Any) -> bytes:
    return compact_json(document)


def _token(n: int = 24) -> str:
    return token(n)


def _adyen(options: SourceOptions, event_type: str, secret: str) -> Sample:
    code, _, outcome = event_type.partition(".")
    item: dict[str, Any] = {
        "pspReference": str(int(time.time() * 1000) * 1000 + int(_token(3), 16) % 1000),
        "originalReference": "",
        "merchantAccountCode": "ExampleMerchantECOM",
        "merchantReference": f"order-{_token(6)}",
        "amount": {"value": 4200, "currency": "EUR"},
        "eventCode": code,
        "eventDate": datetime.now(UTC).isoformat(timespec="seconds"),
        "success": "false" if outcome == "failed" else "true",
        "paymentMethod": "visa",
        "additionalData": {},
    }
    item["additionalData"]["hmacSignature"] = adyen_sign(item, secret)
    document = {"live": "false", "notificationItems": [{"NotificationRequestItem": item}]}
    event_id = f"{item['pspReference']}:{code}:{item['success']}"
    return Sample(event_id, _json(document), {"content-type": "application/json"})


ADYEN = Catalogue(("AUTHORISATION", "AUTHORISATION.failed", "CAPTURE", "REFUND"), _adyen)
