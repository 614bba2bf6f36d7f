"""A provider whose signature is a :class:`connectors.scheme.Scheme`: its ``Provider`` value built
from the scheme (verification, re-signing, the headers to mask, its default tolerance, the HTTP
methods its challenges use), so such a provider's package is data and its documentation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from connectors import scheme_check, scheme_crypto
from connectors.options import ProviderKeys, SourceOptions
from connectors.provider import Provider, Sign
from connectors.scheme import Scheme
from connectors.webhooks import Verdict, WebhookRequest


class PublicKeyKeys(ProviderKeys):
    """A provider that signs with its private key: its public key, as its console shows it."""

    public_key: str | None = None


class VerifyTokenKeys(ProviderKeys):
    """A provider whose subscription handshake carries a verify token the team chose."""

    verify_token_env: str | None = None


def keys_of(options: SourceOptions) -> scheme_check.Keys:
    return scheme_check.Keys(
        public_key=getattr(options.keys, "public_key", None),
        verify_token=options.credentials.get("verify_token"),
    )


def public_key_rule(scheme: Scheme, kind: str) -> Callable[[Mapping[str, Any]], str | None]:
    """The rule of a kind checked with a public key: it is set, and it is one."""

    def rule(values: Mapping[str, Any]) -> str | None:
        key = values.get("public_key")
        if not isinstance(key, str) or not key:
            return f"kind '{kind}' needs key 'public_key' (the provider's public key)"
        try:
            scheme_crypto.load_public_key(scheme, key)
        except ValueError as exc:
            return f"key 'public_key' is not the {scheme.algorithm} public key kind '{kind}' needs ({exc})"
        return None

    return rule


def signer(scheme: Scheme) -> Sign:
    """``Provider.sign`` for a provider whose scheme hookledger can sign (``scheme_check.can_sign``)."""

    def sign(
        options: SourceOptions,
        headers: Mapping[str, str],
        body: bytes,
        secret: str,
        now: float,
        url: str,
    ) -> dict[str, str]:
        return scheme_check.sign(scheme, headers, body, secret, now, url)

    return sign


def declared(kind: str, scheme: Scheme, **fields: Any) -> Provider:
    """The provider of ``kind`` that verifies with ``scheme``; ``fields``: the rest of its
    :class:`connectors.provider.Provider` (its list API, keys, samples, budget, …)."""

    def verify(
        options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]
    ) -> Verdict:
        return scheme_check.verify(
            scheme, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
        )

    methods = {"POST"} | {c.method for c in scheme.challenges if c.method}
    if scheme.asymmetric:
        fields.setdefault("keys", PublicKeyKeys)
        fields.setdefault("validate", public_key_rule(scheme, kind))
        fields.setdefault("signed_with_secret", False)
    if any(c.token for c in scheme.challenges):
        fields.setdefault("receive_credentials", ("verify_token_env",))
    headers = scheme.header_names()
    return Provider(
        kind,
        verify=verify,
        sign=signer(scheme) if scheme_check.can_sign(scheme) else None,
        sensitive_headers=lambda options: headers,
        tolerance=scheme.tolerance,
        methods=tuple(sorted(methods, key=lambda m: m != "POST")),
        scheme=scheme,
        **fields,
    )
