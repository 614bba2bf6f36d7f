"""The contract a provider builds on: what a provider package (``docs/connectors.md``, "Adding a
provider") imports to declare its signature scheme, parse and verify deliveries, and read its
provider's list API.

A promise like :mod:`hookledger`'s own ``__all__`` (``tests/unit/test_public_api.py``); the
reference is docs/api.md. ``Verdict`` here is a webhook's (what the receiver answers), not a
handler's (:class:`hookledger.Verdict`).
"""

from connectors.base import (
    Access,
    Capabilities,
    Connector,
    Cursor,
    DeliveryAttempt,
    Gap,
    Listing,
    Page,
    Record,
    ScanOptions,
)
from connectors.budget import BudgetSettings
from connectors.catalogue import Catalogue, Sample, compact_json, token
from connectors.declared import declared
from connectors.errors import (
    AuthError,
    ConfigError,
    ConnectorError,
    MalformedResponseError,
    NotFoundError,
    UnavailableError,
    UnsupportedError,
)
from connectors.http import ProviderClient
from connectors.options import ProviderKeys, SourceOptions
from connectors.provider import ClientFactory, Provider, headers_named
from connectors.scheme import Scheme, SignatureList
from connectors.webhooks import (
    BadPayload,
    Batch,
    BatchItem,
    Handshake,
    ParsedEvent,
    RejectedDelivery,
    Reply,
    SignatureError,
    Verdict,
    WebhookRequest,
    check_timestamp,
    decode_payload,
    epoch_time,
    form_fields,
    hmac_digest,
    is_form,
    iso_time,
    load_json,
    query_pairs,
    require_header,
    required_id,
    same_digest,
    text_or_none,
)

__all__ = [
    "Access",
    "AuthError",
    "BadPayload",
    "Batch",
    "BatchItem",
    "BudgetSettings",
    "Capabilities",
    "Catalogue",
    "ClientFactory",
    "ConfigError",
    "Connector",
    "ConnectorError",
    "Cursor",
    "DeliveryAttempt",
    "Gap",
    "Handshake",
    "Listing",
    "MalformedResponseError",
    "NotFoundError",
    "Page",
    "ParsedEvent",
    "Provider",
    "ProviderClient",
    "ProviderKeys",
    "Record",
    "RejectedDelivery",
    "Reply",
    "Sample",
    "ScanOptions",
    "Scheme",
    "SignatureError",
    "SignatureList",
    "SourceOptions",
    "UnavailableError",
    "UnsupportedError",
    "Verdict",
    "WebhookRequest",
    "check_timestamp",
    "compact_json",
    "declared",
    "decode_payload",
    "epoch_time",
    "form_fields",
    "headers_named",
    "hmac_digest",
    "is_form",
    "iso_time",
    "load_json",
    "query_pairs",
    "require_header",
    "required_id",
    "same_digest",
    "text_or_none",
    "token",
]
