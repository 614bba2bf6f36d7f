"""What a provider is given of a configured source: typed values, secrets already resolved.

The reconciler builds one from its configuration (``reconciler.sources``); connectors never read
the configuration or the environment themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, field_validator

from connectors.budget import BudgetSettings


class ProviderKeys(BaseModel):
    """A provider's own ``[[sources]]`` keys, declared in its module: their types, defaults and
    limits. ``reconciler.config.SourceSettings`` takes every provider's keys (the file stays flat)
    and refuses a key on a kind that does not declare it."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _lists_are_tuples(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value


K = TypeVar("K", bound=ProviderKeys)


@dataclass(frozen=True)
class SourceOptions:
    name: str
    kind: str
    keys: ProviderKeys  # the provider's own keys, as its module declares them
    base_url: str | None = None
    api_key: str | None = None  # the secret itself (from the variable named by api_key_env)
    api_key_env: str | None = None  # its variable's name, for error messages
    private_key: str | None = None  # a second secret a provider may need (a GitHub App's key)
    tolerance_seconds: int = 300
    retention_days: float | None = None
    page_size: int | None = None
    budget: BudgetSettings | None = None  # None: the provider's default
    # the values of the provider's own keys that name an environment variable (``client_id_env``
    # -> ``client_id``), read by the reconciler (GoPay's OAuth client)
    credentials: Mapping[str, str] = field(default_factory=dict)

    def own(self, cls: type[K]) -> K:
        """The provider's keys as its own class."""
        if not isinstance(self.keys, cls):
            raise TypeError(
                f"source '{self.name}': its keys are {type(self.keys).__name__}, not {cls.__name__}"
            )
        return self.keys

    def hint(self) -> str:
        """Where the credentials come from, for an authentication error."""
        return f"the key in ${self.api_key_env}" if self.api_key_env else "the credentials"

    def require_api_key(self) -> str:
        from connectors.errors import ConfigError

        if not self.api_key:
            raise ConfigError(f"source '{self.name}': no api_key_env is configured")
        return self.api_key
