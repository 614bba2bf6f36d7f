"""The public names are a promise (docs/api.md): each stays importable from ``hookledger`` or
``hookledger.providers`` or ``hookledger.testing``, is the same object as at its home inside, and is in the reference page.
Adding a name is free; removing one fails here (pure: imports and reads one file)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import hookledger
import hookledger.providers
import hookledger.testing

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = (ROOT / "docs" / "api.md").read_text()

# What was promised, by version: a name leaves this list only with a major version.
PROMISED = {
    "hookledger": {
        "AmbiguousError": "reconciler.errors",
        "Business": "reconciler.inbox.handlers",
        "ConfigError": "reconciler.errors",
        "DatabaseError": "reconciler.errors",
        **dict.fromkeys(
            ["DatabaseBusy", "DatabaseRefused", "DatabaseUnavailable"],
            "reconciler.storage.failures",
        ),
        "Event": "reconciler.inbox.handlers",
        "HandlerError": "reconciler.errors",
        "HandlerTimeout": "reconciler.errors",
        "HookledgerError": "reconciler.errors",
        "IdempotencyMiddleware": "reconciler.idempotency",
        "IdempotentTransaction": "reconciler.idempotency",
        "InvalidMessage": "reconciler.outbox",
        "Outbox": "reconciler.outbox",
        "PermanentError": "reconciler.errors",
        "RoutePolicy": "reconciler.idempotency",
        "TransactionError": "reconciler.idempotency",
        "TransientError": "reconciler.errors",
        "Verdict": "reconciler.inbox.handlers",
        "__version__": "reconciler",
        "add_message": "reconciler.outbox",
        "handler": "reconciler.inbox.handlers",
        "idempotent_transaction": "reconciler.idempotency",
        "make_engine": "reconciler.storage.engine",
        "upsert_if_newer": "reconciler.inbox.handlers",
    },
    "hookledger.providers": {
        **dict.fromkeys(
            ["Access", "Capabilities", "Connector", "Cursor", "DeliveryAttempt", "Gap"],
            "connectors.base",
        ),
        **dict.fromkeys(["Listing", "Page", "Record", "ScanOptions"], "connectors.base"),
        "BudgetSettings": "connectors.budget",
        **dict.fromkeys(["Catalogue", "Sample", "compact_json", "token"], "connectors.catalogue"),
        "declared": "connectors.declared",
        **dict.fromkeys(
            [
                "AuthError",
                "ConfigError",
                "ConnectorError",
                "MalformedResponseError",
                "NotFoundError",
                "UnavailableError",
                "UnsupportedError",
            ],
            "connectors.errors",
        ),
        "ProviderClient": "connectors.http",
        **dict.fromkeys(["ProviderKeys", "SourceOptions"], "connectors.options"),
        **dict.fromkeys(["ClientFactory", "Provider", "headers_named"], "connectors.provider"),
        **dict.fromkeys(["Scheme", "SignatureList"], "connectors.scheme"),
        **dict.fromkeys(
            [
                "BadPayload",
                "Batch",
                "BatchItem",
                "Handshake",
                "ParsedEvent",
                "RejectedDelivery",
                "Reply",
                "SignatureError",
                "Verdict",
                "WebhookRequest",
                "check_timestamp",
                "decode_payload",
                "epoch_time",
                "form_fields",
                "hmac_digest",
                "is_form",
                "iso_time",
                "load_json",
                "query_pairs",
                "require_header",
                "required_id",
                "same_digest",
                "text_or_none",
            ],
            "connectors.webhooks",
        ),
    },
}
PROMISED["hookledger.testing"] = {
    **dict.fromkeys(["Applied", "Status"], "reconciler.ops.replaying"),
    **dict.fromkeys(
        ["WAYS", "Deliver", "Deliveries", "HandlerFailed", "order_of"],
        "reconciler.testkit.deliveries",
    ),
    **dict.fromkeys(["event_of", "sample_payload"], "reconciler.testkit.events"),
}
MODULES = {
    "hookledger": hookledger,
    "hookledger.providers": hookledger.providers,
    "hookledger.testing": hookledger.testing,
}


@pytest.mark.parametrize("module", sorted(PROMISED))
def test_every_promised_name_is_public_and_is_its_homes_own(module: str) -> None:
    public = MODULES[module]
    missing = set(PROMISED[module]) - set(public.__all__)
    assert not missing, f"{module} no longer exports {sorted(missing)}"
    for name, home in PROMISED[module].items():
        assert getattr(public, name) is getattr(importlib.import_module(home), name), name


@pytest.mark.parametrize("module", sorted(PROMISED))
def test_every_public_name_is_importable_and_in_the_reference(module: str) -> None:
    public = MODULES[module]
    assert len(set(public.__all__)) == len(public.__all__)
    for name in public.__all__:
        assert hasattr(public, name), f"{module}.__all__ names {name}, which it lacks"
        assert f"`{name}`" in REFERENCE, f"{module}.{name} is not in docs/api.md"


def test_the_reference_names_nothing_that_is_not_public() -> None:
    # each module's section starts with a heading naming it: "## `hookledger.testing`: ..."
    sections = re.split(r"^## `([a-z.]+)`", REFERENCE, flags=re.M)[1:]
    assert sorted(sections[0::2]) == sorted(MODULES)
    for name_of_module, text in zip(sections[0::2], sections[1::2], strict=True):
        module = MODULES[name_of_module]
        for row in re.findall(r"^\| (`[^|]+) \|", text, re.M):
            for name in re.findall(r"`([A-Za-z_]+)`", row):
                assert name in module.__all__, f"docs/api.md lists {name}, not in {module.__name__}"
