"""[[sources]] (every provider's own keys come from its module) and [[sources.checks]]."""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from typing import Any

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from connectors import fingerprint, registry
from connectors.options import ProviderKeys
from reconciler.config.base import _env_secret, _Table
from reconciler.errors import ConfigError


class CheckSettings(_Table):
    """A business mapping: which local table holds the effect of a source object (``[[sources.checks]]``)."""

    object_type: str | None = None
    event_types: tuple[str, ...] = ()
    table: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
    key: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    fields: dict[str, str] = Field(default_factory=dict)
    unique_by: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    require_row: bool = True
    amount: str | None = None
    currency: str | None = None
    where: str | None = None

    @field_validator("event_types", mode="before")
    @classmethod
    def _tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @model_validator(mode="after")
    def _scope(self) -> CheckSettings:
        if bool(self.object_type) == bool(self.event_types):
            raise ValueError("a check needs exactly one of 'object_type' or 'event_types'")
        for column in self.fields:
            if not column.isidentifier():
                raise ValueError(f"fields: '{column}' is not a column name")
        return self

    def applies_to(self, object_type: str | None, event_type: str | None) -> bool:
        if self.event_types:
            return event_type in self.event_types
        return object_type == self.object_type


class SourceSettings(_Table):
    """One ``[[sources]]`` table: the keys every kind takes, declared here, and its kind's own keys
    (its provider's ``keys`` class: validated by that class alone, so a kind's defaults never
    reach another kind; :attr:`keys`)."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    kind: str
    base_url: str | None = None
    api_key_env: str | None = None
    signing_secret_env: str | None = None
    enabled: bool = True
    tolerance_seconds: int | None = Field(default=None, ge=0)  # None: the provider's
    forward_url: str | None = None
    # every provider
    initial_lookback_hours: int = Field(default=72, ge=1, le=24 * 365)
    retention_days: float | None = Field(default=None, gt=0)
    page_size: int | None = Field(default=None, ge=1, le=1000)
    # the request budget (None: the provider's default, docs/connectors.md "Request budget"); a rate of 0
    # sets no client-side limit, the provider's own signals still slow requests down
    max_requests_per_second: float | None = Field(default=None, ge=0, le=10_000)
    max_concurrency: int | None = Field(default=None, ge=1, le=64)
    # payload paths left out of the content fingerprint (None: the provider's documented default)
    fingerprint_ignore: tuple[str, ...] | None = None
    # the request header holding a correlation id (None: X-Correlation-Id, then X-Request-Id)
    correlation_header: str | None = Field(default=None, pattern=r"^[A-Za-z0-9-]{1,64}$")
    # an environment variable holding "user:password": deliveries must carry it as HTTP Basic auth
    # (Adyen offers it on top of its HMAC; any provider that can send it may use it)
    basic_auth_env: str | None = None
    checks: tuple[CheckSettings, ...] = ()
    _keys: ProviderKeys = PrivateAttr(default_factory=ProviderKeys)

    @field_validator("checks", mode="before")
    @classmethod
    def _checks_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("fingerprint_ignore", mode="before")
    @classmethod
    def _ignore_paths(cls, value: Any) -> Any:
        if isinstance(value, list):
            for path in value:
                if not isinstance(path, str):
                    raise ValueError("must be a list of JSON paths (strings)")
                fingerprint.parse_path(path)  # PathError is a ValueError: named with the key
            return tuple(value)
        return value

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in registry.kinds():
            raise ValueError(f"Input should be {' or '.join(repr(k) for k in registry.kinds())}")
        return value

    @model_validator(mode="after")
    def _check_kind_keys(self) -> SourceSettings:
        """The kind's own keys, validated by its provider's class (a key it does not take is refused
        naming the kind), then the rules across them (its module's)."""
        own = registry.provider(self.kind)
        given = dict(self.model_extra or {})
        for key in sorted(set(given) - set(own.keys.model_fields)):
            raise ValueError(_foreign_key(key, self.kind))
        keys = own.keys.model_validate(given)  # errors name the key: sources[i].<key>
        self.__pydantic_private__["_keys"] = keys  # type: ignore[index]
        problem = own.validate({**self.model_dump(exclude=set(given)), **keys.model_dump()})
        if problem:
            raise ValueError(problem)
        return self

    @property
    def keys(self) -> ProviderKeys:
        """The kind's own keys, as its provider's class holds them (defaults included)."""
        return self._keys

    def key(self, name: str) -> Any:
        """A key of the kind's own, or one every kind takes (None when the kind has no such key)."""
        if name in type(self).model_fields:
            return getattr(self, name)
        return getattr(self._keys, name, None)

    def fingerprint_paths(self) -> tuple[tuple[fingerprint.Segment, ...], ...]:
        """The parsed paths the content fingerprint leaves out."""
        paths = self.fingerprint_ignore
        if paths is None:
            paths = registry.provider(self.kind).fingerprint_ignore
        return tuple(fingerprint.parse_path(p) for p in paths)

    def api_key(self, environ: Mapping[str, str] | None = None) -> str:
        """The API key or token from the environment variable named by ``api_key_env``."""
        return self._env_secret("api_key_env", self.api_key_env, environ)

    def private_key(self, environ: Mapping[str, str] | None = None) -> str:
        return self._env_secret("private_key_env", self.key("private_key_env"), environ)

    def credential_keys(self) -> dict[str, str]:
        """The keys naming the environment variables the source's API credentials come from
        (``api_key_env``, and its provider's own ``*_env`` keys), with the variables they name:
        a source with none only receives."""
        named = {"api_key_env": self.api_key_env}
        named |= {k: getattr(self.keys, k) for k in type(self.keys).model_fields}
        return {k: v for k, v in named.items() if k.endswith("_env") and v}

    def credential(self, key: str, environ: Mapping[str, str] | None = None) -> str:
        """The value of the variable a credential key names (a ConfigError naming both when
        unset)."""
        return self._env_secret(key, self.key(key), environ)

    def _env_secret(self, key: str, var: str | None, environ: Mapping[str, str] | None) -> str:
        return _env_secret(f"source '{self.name}'", key, var, environ)

    def basic_auth(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The ``Authorization`` value deliveries must carry (None: not asked for)."""
        if not self.basic_auth_env:
            return None
        pair = self._env_secret("basic_auth_env", self.basic_auth_env, environ)
        if ":" not in pair:
            raise ConfigError(
                f"source '{self.name}': environment variable {self.basic_auth_env} (named by "
                "basic_auth_env) must hold user:password"
            )
        return "Basic " + base64.b64encode(pair.encode()).decode()

    def signing_secrets(self, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """The signing secrets from the environment (comma-separated: every one is accepted)."""
        env = os.environ if environ is None else environ
        if not self.signing_secret_env:
            raise ConfigError(f"source '{self.name}': no signing_secret_env is configured")
        raw = env.get(self.signing_secret_env)
        if not raw or not raw.strip():
            raise ConfigError(
                f"source '{self.name}': environment variable {self.signing_secret_env} "
                "(named by signing_secret_env) is not set"
            )
        return tuple(part.strip() for part in raw.split(",") if part.strip())


def _foreign_key(key: str, kind: str) -> str:
    """Why a key is refused on a kind: the kinds that take it, or that none does."""
    others = registry.kinds_taking(key)
    if others:
        return f"key '{key}' applies only to kind {' or '.join(repr(k) for k in others)}"
    return f"kind '{kind}' takes no key '{key}'"
