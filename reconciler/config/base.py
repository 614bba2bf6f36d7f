"""What every settings table shares: its base model, the defaults other modules name, and how a
secret is read from the environment variable a key names."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import (
    BaseModel,
    ConfigDict,
)

from reconciler.errors import ConfigError

DEFAULT_CONFIG_PATH = Path("config.toml")
DEFAULT_DATABASE_URL = "sqlite:///var/hookledger.db"
DEFAULT_SCHEDULE = "0 2 * * *"


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _env_secret(owner: str, key: str, var: str | None, environ: Mapping[str, str] | None) -> str:
    """The value of the environment variable that ``key`` names (never read from the file)."""
    env = os.environ if environ is None else environ
    if not var:
        raise ConfigError(f"{owner}: no {key} is configured")
    value = env.get(var, "").strip()
    if not value:
        raise ConfigError(f"{owner}: environment variable {var} (named by {key}) is not set")
    return value


def _standard_secrets(
    owner: str, key: str, var: str | None, environ: Mapping[str, str] | None
) -> tuple[str, ...]:
    """:func:`_secret_list` of Standard Webhooks signing secrets (``whsec_`` + base64), each
    checked: a malformed one is a ConfigError naming the owner and the variable."""
    from connectors.standard_webhooks import standard_key
    from connectors.webhooks import SignatureError

    secrets = _secret_list(owner, key, var, environ)
    for secret in secrets:
        try:
            standard_key(secret)
        except SignatureError:
            raise ConfigError(
                f"{owner}: the secret in {var} is not a Standard Webhooks secret "
                "(whsec_ followed by base64)"
            ) from None
    return secrets


def _secret_list(
    owner: str, key: str, var: str | None, environ: Mapping[str, str] | None
) -> tuple[str, ...]:
    """The comma-separated secrets in the variable ``key`` names (none when no variable is named);
    several while a secret is rotated."""
    if not var:
        return ()
    raw = _env_secret(owner, key, var, environ)
    return tuple(part.strip() for part in raw.split(",") if part.strip())
