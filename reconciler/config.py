"""Typed settings loaded once from ``config.toml``.

Resolution: ``--config PATH`` > ``$HOOKLEDGER_CONFIG`` > ``./config.toml`` (built-in defaults if that
default file does not exist). ``$HOOKLEDGER_DATABASE_URL`` overrides ``[database] url``.

Every unknown key, wrong type or missing required value raises :class:`ConfigError` naming the file,
the table and the key. Secrets are never read from the file: a source names the environment variables
that hold them (``signing_secret_env``, ``api_key_env``).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from reconciler.errors import ConfigError

DEFAULT_CONFIG_PATH = Path("config.toml")
DEFAULT_DATABASE_URL = "sqlite:///var/hookledger.db"

SourceKind = Literal["stripe", "github", "shopify", "standard", "generic"]
GENERIC_ONLY_KEYS = (
    "signature_header",
    "signature_algorithm",
    "signature_encoding",
    "signature_prefix",
    "signed_payload",
    "id_header",
    "id_json_path",
    "type_header",
    "type_json_path",
)


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DatabaseSettings(_Table):
    url: str = DEFAULT_DATABASE_URL
    echo: bool = False


class ReceiverSettings(_Table):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    max_body_bytes: int = Field(default=1_048_576, ge=1)
    # Group commit: requests waiting at the same moment are stored in one transaction.
    batch_max_size: int = Field(default=256, ge=1, le=10_000)
    # Concurrent group-commit writers (SQLite always uses one: it has a single writer).
    writers: int = Field(default=2, ge=1, le=64)


class WorkerSettings(_Table):
    handlers: tuple[str, ...] = ()
    forward_url: str | None = None
    forward_timeout_seconds: float = Field(default=10.0, gt=0)
    max_attempts: int = Field(default=8, ge=1)
    backoff_base_seconds: float = Field(default=2.0, gt=0)
    backoff_max_seconds: float = Field(default=3600.0, gt=0)
    lease_seconds: float = Field(default=60.0, gt=0)
    batch_size: int = Field(default=100, ge=1, le=10_000)
    poll_interval_seconds: float = Field(default=1.0, gt=0)
    concurrency: int = Field(default=1, ge=1, le=64)

    @field_validator("handlers", mode="before")
    @classmethod
    def _list_to_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value


class LoggingSettings(_Table):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class SourceSettings(_Table):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    kind: SourceKind
    base_url: str | None = None
    api_key_env: str | None = None
    signing_secret_env: str | None = None
    enabled: bool = True
    tolerance_seconds: int = Field(default=300, ge=0)
    forward_url: str | None = None
    # kind = "generic" only
    signature_header: str | None = None
    signature_algorithm: Literal["sha1", "sha256", "sha512"] = "sha256"
    signature_encoding: Literal["hex", "base64"] = "hex"
    signature_prefix: str = ""
    signed_payload: Literal["body"] = "body"
    id_header: str | None = None
    id_json_path: str | None = None
    type_header: str | None = None
    type_json_path: str | None = None

    @model_validator(mode="after")
    def _check_kind_keys(self) -> SourceSettings:
        if self.kind == "generic":
            if not self.signature_header:
                raise ValueError("kind 'generic' needs key 'signature_header'")
            if not (self.id_header or self.id_json_path):
                raise ValueError("kind 'generic' needs key 'id_header' or 'id_json_path'")
        else:
            for key in GENERIC_ONLY_KEYS:
                if key in self.model_fields_set:
                    raise ValueError(f"key '{key}' applies only to kind 'generic'")
        return self

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


class Settings(_Table):
    database: DatabaseSettings = DatabaseSettings()
    receiver: ReceiverSettings = ReceiverSettings()
    worker: WorkerSettings = WorkerSettings()
    logging: LoggingSettings = LoggingSettings()
    sources: tuple[SourceSettings, ...] = ()

    @field_validator("sources", mode="before")
    @classmethod
    def _sources_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @model_validator(mode="after")
    def _unique_names(self) -> Settings:
        seen: set[str] = set()
        for source in self.sources:
            if source.name in seen:
                raise ValueError(f"source name '{source.name}' is used twice")
            seen.add(source.name)
        return self

    def source(self, name: str) -> SourceSettings | None:
        for source in self.sources:
            if source.name == name:
                return source
        return None


@dataclass(frozen=True)
class LoadedConfig:
    settings: Settings
    path: Path | None  # None: built-in defaults


def _describe_location(loc: tuple[int | str, ...], data: Mapping[str, Any]) -> str:
    """Turn a pydantic error location into ``table [sources][1] (name 'x'), key 'y'`` wording."""
    table = ""
    note = ""
    node: Any = data
    for i, item in enumerate(loc):
        if isinstance(item, int):
            table += f"[{item}]"
            node = node[item] if isinstance(node, list) and item < len(node) else None
            name = node.get("name") if isinstance(node, dict) else None
            note = f" (name '{name}')" if isinstance(name, str) else ""
            continue
        child = node.get(item) if isinstance(node, dict) else None
        if i == len(loc) - 1 or not isinstance(child, dict | list):
            return f"table {table or 'top level'}{note}, key '{item}'"
        table += f"[{item}]"
        note = ""
        node = child
    return f"table {table or 'top level'}{note}"


def parse_settings(data: Mapping[str, Any], origin: str) -> Settings:
    try:
        return Settings.model_validate(dict(data))
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = _describe_location(tuple(err["loc"]), data)
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key"
            elif err["type"] == "missing":
                msg = "required key is missing"
            lines.append(f"{origin}: {where}: {msg}")
        raise ConfigError("\n".join(lines)) from None


def load_config(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> LoadedConfig:
    env = os.environ if environ is None else environ
    explicit = path or env.get("HOOKLEDGER_CONFIG")
    cfg_path = Path(explicit) if explicit else DEFAULT_CONFIG_PATH
    data: dict[str, Any] = {}
    used: Path | None = None
    if cfg_path.exists():
        try:
            with cfg_path.open("rb") as fh:
                data = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{cfg_path}: not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{cfg_path}: cannot be read: {exc.strerror}") from None
        used = cfg_path
    elif explicit:
        raise ConfigError(f"{cfg_path}: configuration file not found")
    settings = parse_settings(data, str(cfg_path))
    override = env.get("HOOKLEDGER_DATABASE_URL")
    if override:
        settings = settings.model_copy(
            update={"database": settings.database.model_copy(update={"url": override})}
        )
    return LoadedConfig(settings=settings, path=used)
