"""What each registered kind needs configured beyond a signing secret, and a secret of the form it
takes: shared by the tests generated from the registry (every kind fuzzed, every kind receiving its
samples), so a new kind that needs more fails there by name until it is listed here."""

from __future__ import annotations

import base64
from typing import Any

from nacl.signing import SigningKey

from tests.integration.test_receiver_discord import PUBLIC, SEED

ADYEN_KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA000"
# a Svix-style secret is also a plain one: every HMAC kind takes it as written
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _public_key(private: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    return base64.b64encode(
        private.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    ).decode()


def _telnyx_key() -> str:
    return base64.b64encode(bytes(SigningKey(SEED).verify_key)).decode()


def _sendgrid_key() -> str:
    from cryptography.hazmat.primitives.asymmetric import ec

    return _public_key(ec.derive_private_key(7, ec.SECP256R1()))


EXTRA_KEYS: dict[str, dict[str, Any]] = {
    "discord": {"public_key": PUBLIC},
    "discord_interactions": {"public_key": PUBLIC},
    "generic": {"signature_header": "X-Signature", "id_json_path": "id"},
    "gopay": {"client_id_env": "T_GOPAY_ID", "client_secret_env": "T_GOPAY_SECRET"},
    "meta": {"verify_token_env": "T_GOPAY_ID"},
    "sendgrid": {"public_key": _sendgrid_key()},
    "telnyx": {"public_key": _telnyx_key()},
    "braintree": {"public_key": "fuzz_public_key"},
    "paypal": {
        "webhook_id": "8PT597110X687430LKGECATA",
        "client_id_env": "T_GOPAY_ID",
        "client_secret_env": "T_GOPAY_SECRET",
    },
    "mollie": {"api_key_env": "T_GOPAY_SECRET"},
}


def secret_for(kind: str, algorithm: str | None, *, other: bool = False) -> str:
    """A signing secret of the form the kind takes (``other``: a second one, as well-formed)."""
    if kind == "adyen":
        return "00" * 32 if other else ADYEN_KEY
    if algorithm == "basic":
        return "someone:else" if other else "hookledger:s3cret"
    return "whsec_eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4" if other else SECRET
