"""The ``generic`` kind, received (``kind = "generic"``): a sender hookledger has no package for,
its signature and identity configured (``connectors.providers.generic.scheme``: the keys and the
:class:`connectors.scheme.Scheme` they describe), verified and signed by ``connectors.scheme_check``;
its list API, where it has one, is read as a generic JSON list (``connectors.json_list``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connectors import scheme_check
from connectors.declared import keys_of, public_key_rule
from connectors.errors import ConfigError
from connectors.json_list import ListKeys, _build, _list_rule
from connectors.options import SourceOptions
from connectors.provider import Provider
from connectors.providers.generic.samples import GENERIC as GENERIC_SAMPLES
from connectors.providers.generic.scheme import GenericKeys, scheme_of
from connectors.scheme import SchemeError
from connectors.webhooks import Verdict, WebhookRequest


class GenericSenderKeys(GenericKeys, ListKeys):
    """The generic provider's keys: its signature and identity, and its list API."""


def _generic_rule(values: Mapping[str, Any]) -> str | None:
    keys = GenericKeys.model_validate(
        {k: v for k, v in values.items() if k in GenericKeys.model_fields}
    )
    try:
        scheme = scheme_of(keys)
    except SchemeError as exc:
        return str(exc)
    if scheme.asymmetric:
        problem = public_key_rule(scheme, "generic")(values)
        if problem:
            return problem
    return _list_rule(values)


def _verify_generic(
    options: SourceOptions, request: WebhookRequest, secrets: tuple[str, ...]
) -> Verdict:
    scheme = scheme_of(options.own(GenericKeys))
    return scheme_check.verify(
        scheme, request, secrets, keys_of(options), tolerance=options.tolerance_seconds
    )


def _sign_generic(
    options: SourceOptions,
    headers: Mapping[str, str],
    body: bytes,
    secret: str,
    now: float,
    url: str,
) -> dict[str, str]:
    scheme = scheme_of(options.own(GenericKeys))
    if not scheme_check.can_sign(scheme):
        raise ConfigError(
            f"source '{options.name}': its signature ({scheme.algorithm}, in "
            f"{scheme.signatures[0]}) is one hookledger cannot make: only its sender can"
        )
    return scheme_check.sign(scheme, headers, body, secret, now, url)


GENERIC = Provider(
    "generic",
    samples=GENERIC_SAMPLES,
    verify=_verify_generic,
    build=_build,
    keys=GenericSenderKeys,
    validate=_generic_rule,
    sign=_sign_generic,
    sensitive_headers=lambda options: scheme_of(options.own(GenericKeys)).header_names(),
)
