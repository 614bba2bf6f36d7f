"""[outbox] and [[outbox.targets]]: where the handlers' outgoing messages go."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
)

from reconciler.config.base import _env_secret, _standard_secrets, _Table


class OutboxTargetSettings(_Table):
    """A destination of outgoing messages (``[[outbox.targets]]``)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    url: str
    timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    max_attempts: int = Field(default=8, ge=1, le=100)
    # Standard Webhooks signature of every message (webhook-id/-timestamp/-signature headers), so
    # the receiver can verify us; the variable holds whsec_... secrets, comma-separated to rotate
    signing_secret_env: str | None = None
    bearer_token_env: str | None = None  # sent as "Authorization: Bearer <token>"
    # a later message for the same object waits until the earlier one is sent (or dead)
    order_by_object: bool = False

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"'{value}' is not an http:// or https:// URL")
        return value

    def signing_secrets(self, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """The signing secrets (empty: messages are not signed)."""
        return _standard_secrets(
            self._owner, "signing_secret_env", self.signing_secret_env, environ
        )

    def bearer_token(self, environ: Mapping[str, str] | None = None) -> str | None:
        if not self.bearer_token_env:
            return None
        return _env_secret(self._owner, "bearer_token_env", self.bearer_token_env, environ)

    @property
    def _owner(self) -> str:
        return f"outbox target '{self.name}'"


class OutboxSettings(_Table):
    """The publisher of outgoing messages (``hookledger publish``, ``hookledger worker --publish``)."""

    concurrency: int = Field(default=4, ge=1, le=64)  # messages in flight at once, per publisher
    poll_interval_seconds: float = Field(default=1.0, gt=0)
    lease_seconds: float = Field(default=60.0, gt=0)
    backoff_base_seconds: float = Field(default=2.0, gt=0)
    backoff_max_seconds: float = Field(default=3600.0, gt=0)
    max_payload_bytes: int = Field(default=1_048_576, ge=1)
    targets: tuple[OutboxTargetSettings, ...] = ()

    @field_validator("targets", mode="before")
    @classmethod
    def _targets_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("targets")
    @classmethod
    def _consistent(
        cls, targets: tuple[OutboxTargetSettings, ...], info: ValidationInfo
    ) -> tuple[OutboxTargetSettings, ...]:
        lease = info.data.get("lease_seconds")  # validated before: it is declared first
        seen: set[str] = set()
        for target in targets:
            if target.name in seen:
                raise ValueError(f"target name '{target.name}' is used twice")
            seen.add(target.name)
            # a lease shorter than a request lets a second publisher send while the first waits
            if lease is not None and target.timeout_seconds >= lease:
                raise ValueError(
                    f"target '{target.name}': timeout_seconds ({target.timeout_seconds:g}) must be "
                    f"shorter than [outbox] lease_seconds ({lease:g})"
                )
        return targets

    def target(self, name: str) -> OutboxTargetSettings | None:
        for target in self.targets:
            if target.name == name:
                return target
        return None
