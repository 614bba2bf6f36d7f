"""Nothing registered is left half-done (issue 47): generated from the registry, so a kind that is
registered without its vectors, its samples (or a stated reason), its documentation or a working
sample fails here by name."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from connectors.options import SourceOptions
from connectors.registry import every_provider, kinds, provider
from connectors.webhooks import Batch, ParsedEvent, Received, WebhookRequest
from tests.kinds import EXTRA_KEYS, secret_for

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "providers"
PROVIDERS_MD = (ROOT / "docs" / "providers.md").read_text()

# where a kind's vectors are when the folder is not named as the kind
FIXTURE_DIR = {"standard": "standard-webhooks"}
# kinds with no signature vector of their own, and why
NO_VECTOR = {
    "generic": "configured per source: tests/unit/test_generic_scheme.py signs and checks each family",
    "gopay": "a notification carries no signature: it is confirmed through GoPay's API",
    "discord_interactions": "Discord's scheme and key: tests/fixtures/providers/discord's vector",
}
# kinds whose deliveries hookledger cannot make (``hookledger send`` has no sample), and why
NO_SAMPLES = {
    "discord": "only Discord holds the application's private key",
    "discord_interactions": "only Discord holds the application's private key",
    "gopay": "a notification is confirmed against GoPay's own API",
    "paypal": "a delivery is confirmed through PayPal's verify API",
    "mollie": "a notification is confirmed by reading the payment from Mollie's API",
    "aws_sns": "signed with Amazon's certificate",
    "sendgrid": "only SendGrid holds the private key (ECDSA)",
    "telnyx": "only Telnyx holds the private key (Ed25519)",
}


def test_at_least_forty_kinds_are_registered() -> None:
    assert len(kinds()) >= 40, kinds()
    assert len({p.kind for p in every_provider()}) == len(kinds())


@pytest.mark.parametrize("kind", kinds())
def test_every_kind_has_signature_vectors_or_a_reason(kind: str) -> None:
    if kind in NO_VECTOR:
        return
    folder = FIXTURES / FIXTURE_DIR.get(kind, kind)
    vectors = sorted(folder.glob("signature_vector*.json"))
    assert vectors, f"{kind}: no tests/fixtures/providers/{folder.name}/signature_vector*.json"
    for path in vectors:
        json.loads(path.read_text())
    assert f"| {folder.name}/signature_vector" in (FIXTURES / "README.md").read_text(), (
        f"{kind}: its vector has no row (source, licence) in tests/fixtures/providers/README.md"
    )


@pytest.mark.parametrize("kind", kinds())
def test_every_kind_has_a_row_and_a_page_in_the_providers_docs(kind: str) -> None:
    assert f"| `{kind}` |" in PROVIDERS_MD, f"{kind}: no row in docs/providers.md 'Every kind'"
    page = ROOT / "docs" / "providers" / f"{kind}.md"
    assert page.exists() or f'(`kind = "{kind}"`' in PROVIDERS_MD, f"{kind}: no facts page"


@pytest.mark.parametrize("kind", kinds())
def test_every_kind_has_samples_or_a_stated_reason(kind: str) -> None:
    own = provider(kind)
    assert (own.samples is None) == (kind in NO_SAMPLES), (
        f"{kind}: samples {'missing' if own.samples is None else 'present'}; NO_SAMPLES says otherwise"
    )


def _options(kind: str) -> SourceOptions:
    own = provider(kind)
    return SourceOptions(
        name=kind,
        kind=kind,
        keys=own.keys.model_validate(
            {k: v for k, v in EXTRA_KEYS.get(kind, {}).items() if k in own.keys.model_fields}
        ),
        tolerance_seconds=own.tolerance,
        credentials={"verify_token": "verify-token"},
    )


@pytest.mark.parametrize("kind", [k for k in kinds() if provider(k).samples is not None])
def test_every_sample_verifies_as_its_provider_signs_it(kind: str) -> None:
    own = provider(kind)
    assert own.samples is not None
    secret = secret_for(kind, own.scheme.algorithm if own.scheme else None)
    options = _options(kind)
    url = f"https://hooks.example.com/webhooks/{kind}"
    for event_type in own.samples.types:
        sample = own.samples.sample(options, event_type, secret)
        headers = {k.lower(): v for k, v in sample.headers.items()}
        if own.sign is not None:
            headers |= own.sign(options, sample.headers, sample.body, secret, time.time(), url)
        request = WebhookRequest("POST", url, headers, sample.body, time.time())
        verdict = own.verify(options, request, (secret,))
        if isinstance(verdict, Received):
            verdict = verdict.event
        ids = (
            [item.event.event_id for item in verdict.items]
            if isinstance(verdict, Batch)
            else [verdict.event_id]
            if isinstance(verdict, ParsedEvent)
            else []
        )
        # an id completed on arrival (Dropbox's: its arrival) starts with the sample's
        assert any(i == sample.event_id or i.startswith(f"{sample.event_id}:") for i in ids), (
            kind,
            event_type,
            verdict,
        )
