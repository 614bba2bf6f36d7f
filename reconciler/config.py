"""Typed settings loaded once from ``config.toml``.

Resolution: ``--config PATH`` > ``$HOOKLEDGER_CONFIG`` > ``./config.toml`` (built-in defaults if that
default file does not exist). ``$HOOKLEDGER_DATABASE_URL`` overrides ``[database] url``.

Every unknown key, wrong type or missing required value raises :class:`ConfigError` naming the file,
the table and the key. Secrets are never read from the file: a source names the environment variables
that hold them (``signing_secret_env``, ``api_key_env``).
"""

from __future__ import annotations

import base64
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from connectors import fingerprint, registry
from reconciler.errors import ConfigError
from reconciler.logs import escape_control

DEFAULT_CONFIG_PATH = Path("config.toml")
DEFAULT_DATABASE_URL = "sqlite:///var/hookledger.db"
DEFAULT_SCHEDULE = "0 2 * * *"


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class DatabaseSettings(_Table):
    url: str = DEFAULT_DATABASE_URL
    echo: bool = False
    # PostgreSQL: how long a connection attempt may take before the command fails
    connect_timeout_seconds: float = Field(default=10.0, gt=0, le=600)


class ReceiverSettings(_Table):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    max_body_bytes: int = Field(default=1_048_576, ge=1)
    # Group commit: requests waiting at the same moment are stored in one transaction.
    batch_max_size: int = Field(default=256, ge=1, le=10_000)
    # Concurrent group-commit writers (SQLite always uses one: it has a single writer).
    writers: int = Field(default=2, ge=1, le=64)
    # Rejections for source names that are not configured, stored per client address and minute
    # (the rest are only counted): strangers cannot grow the deliveries table without bound.
    unknown_source_log_per_minute: int = Field(default=10, ge=0, le=100_000)
    # where providers reach the receiver (behind a proxy, say): `hookledger doctor` checks that its
    # /healthz answers there
    public_url: str | None = Field(default=None, pattern=r"^https?://[^\s?#]+$")
    # a body not received in full within this long is answered 408: a half-sent body cannot hold a
    # request open for ever
    body_timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    # webhook requests at once; beyond, 503 with Retry-After (health checks and metrics still answer)
    limit_concurrency: int = Field(default=256, ge=1, le=100_000)


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
    # GET /metrics of the worker process (handler durations, outcomes): off unless a port is set
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_host: str = "127.0.0.1"
    # SQLite: a handler holding the write lock longer than this is warned about, once per handler
    sqlite_lock_warn_seconds: float = Field(default=2.0, gt=0)

    @field_validator("handlers", mode="before")
    @classmethod
    def _list_to_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value


class ReconcileSettings(_Table):
    grace_seconds: int = Field(default=300, ge=0)
    stuck_after_seconds: int = Field(default=3600, ge=1)
    overlap_seconds: int = Field(default=300, ge=0)
    # renewed every few seconds by the running run: a dead run frees the source this long after
    lease_seconds: int = Field(default=120, ge=10)
    timezone: str = "UTC"  # before schedule: the schedule's validator reads it
    schedule: str = DEFAULT_SCHEDULE
    misfire_grace_seconds: int = Field(default=3600, ge=1)
    snapshot_interval_seconds: int = Field(default=60, ge=5)
    # how long one request of a run keeps waiting out 429s and retrying 5xx, a proxy's HTML page or
    # a body cut short before the run fails (its cursor kept)
    max_wait_seconds: float = Field(default=300.0, ge=1, le=86_400)

    @field_validator("timezone")
    @classmethod
    def _valid_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone '{value}'") from None
        return value

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, value: str, info: ValidationInfo) -> str:
        """Every command rejects a schedule the scheduler would refuse, not only ``schedule``."""
        if value == DEFAULT_SCHEDULE:
            return value  # known valid: skips importing APScheduler's cron parser at start-up
        from reconciler.crontab import crontab_trigger

        tz = info.data.get("timezone", "UTC")  # validated before: it is declared first
        try:
            crontab_trigger(value, ZoneInfo(tz))
        except ValueError as exc:
            raise ValueError(f"'{value}' is not a valid cron expression ({exc})") from None
        return value


class BusinessSettings(_Table):
    url: str | None = None  # default: the inbox database
    # PostgreSQL: each business read is READ ONLY and may take this long at most
    statement_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)


class LoggingSettings(_Table):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # "json": one JSON object a line (level, logger, message, time and the structured fields)
    format: Literal["text", "json"] = "text"


DEFAULT_MASK_FIELDS = (
    "email",
    "receipt_email",
    "customer_email",
    "phone",
    "address",
    "billing_address",
    "shipping_address",
    "billing_details",
    "shipping",
    # payment details (values that look like card numbers or IBANs are masked under any key too)
    "card_number",
    "cvc",
    "cvv",
    "cvv2",
    "exp_month",
    "exp_year",
    "iban",
    "bank_account",
    "account_number",
    "routing_number",
    "sort_code",
    "bsb_number",
)


class RetentionSettings(_Table):
    keep_days: int = Field(default=7, ge=1, le=3650)  # hookledger prune's default


DEFAULT_PRUNE_SCHEDULE = "15 4 * * *"


class PruneSettings(_Table):
    # when `hookledger schedule` prunes (cron, in [reconcile] timezone), by [retention] keep_days;
    # "" leaves pruning to a timer or cron running `hookledger prune`
    schedule: str = DEFAULT_PRUNE_SCHEDULE

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, value: str) -> str:
        """Refused by every command, as the scheduler would refuse it."""
        if value in (DEFAULT_PRUNE_SCHEDULE, "") or not value.strip():
            return value
        from reconciler.crontab import crontab_trigger

        try:
            crontab_trigger(value, ZoneInfo("UTC"))
        except ValueError as exc:
            raise ValueError(f"'{value}' is not a valid cron expression ({exc})") from None
        return value


class DashboardAuthSettings(_Table):
    """Optional OIDC sign-in through Streamlit's ``st.login`` (needs the ``auth`` extra: Authlib)."""

    enabled: bool = False
    operators: tuple[str, ...] = ()  # who may act (e-mail or subject); everyone else reads only
    client_id: str | None = None
    client_secret_env: str | None = None
    cookie_secret_env: str | None = None
    server_metadata_url: str | None = None
    redirect_uri: str | None = None  # default: http://<host>:<port>/oauth2callback

    @field_validator("operators", mode="before")
    @classmethod
    def _list_to_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @model_validator(mode="after")
    def _complete(self) -> DashboardAuthSettings:
        if self.enabled:
            for key in (
                "client_id",
                "client_secret_env",
                "cookie_secret_env",
                "server_metadata_url",
            ):
                if not getattr(self, key):
                    raise ValueError(f"'{key}' is required when sign-in is enabled")
        return self

    def secret(self, key: str, environ: Mapping[str, str] | None = None) -> str:
        env = os.environ if environ is None else environ
        var = getattr(self, key)
        value = env.get(var or "")
        if not value:
            raise ConfigError(f"[dashboard.auth] {key}: environment variable {var} is not set")
        return value


class DashboardSettings(_Table):
    host: str = "127.0.0.1"
    port: int = Field(default=8501, ge=1, le=65535)
    operator: str | None = None  # recorded in audit_log when sign-in is off (default: the OS user)
    cache_ttl_seconds: int = Field(default=15, ge=0, le=3600)
    mask_fields: tuple[str, ...] = DEFAULT_MASK_FIELDS  # payload keys shown as <masked>
    auth: DashboardAuthSettings = DashboardAuthSettings()
    # where people open the dashboard (behind a proxy, say): links printed by the CLI start with it
    public_url: str | None = Field(default=None, pattern=r"^https?://[^\s?#]+$")
    # the pages' reads from here (a read replica); actions still write to [database] url
    database_url: str | None = None

    @field_validator("database_url")
    @classmethod
    def _a_database_url(cls, value: str | None) -> str | None:
        """A URL SQLAlchemy can read (the value is not repeated: it may hold a password)."""
        if value is None:
            return value
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            make_url(value)
        except ArgumentError:
            raise ValueError(
                "not a database URL (dialect+driver://user@host:port/database, or sqlite:///path)"
            ) from None
        return value

    @property
    def base_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")

    @field_validator("mask_fields", mode="before")
    @classmethod
    def _list_to_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value


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
    from connectors.signatures import standard_key
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


class SourceSettings(_Table, registry.AllProviderKeys):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    kind: str
    base_url: str | None = None
    api_key_env: str | None = None
    signing_secret_env: str | None = None
    enabled: bool = True
    tolerance_seconds: int = Field(default=300, ge=0)
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
    # each provider's own keys come from its module (connectors.registry.AllProviderKeys)
    checks: tuple[CheckSettings, ...] = ()

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
        """A provider's own keys only on its kind, and the rules across them (its module's)."""
        for key in sorted(self.model_fields_set):
            kinds = registry.kinds_taking(key)
            if kinds and self.kind not in kinds:
                raise ValueError(
                    f"key '{key}' applies only to kind {' or '.join(repr(k) for k in kinds)}"
                )
        problem = registry.provider(self.kind).validate(self.model_dump())
        if problem:
            raise ValueError(problem)
        return self

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
        return self._env_secret("private_key_env", self.private_key_env, environ)

    def credential_keys(self) -> dict[str, str]:
        """The keys naming the environment variables the source's API credentials come from
        (``api_key_env``, and its provider's own ``*_env`` keys), with the variables they name:
        a source with none only receives."""
        named = {"api_key_env": self.api_key_env}
        named |= {k: getattr(self, k) for k in registry.provider(self.kind).keys.model_fields}
        return {k: v for k, v in named.items() if k.endswith("_env") and v}

    def credential(self, key: str, environ: Mapping[str, str] | None = None) -> str:
        """The value of the variable a credential key names (a ConfigError naming both when
        unset)."""
        return self._env_secret(key, getattr(self, key), environ)

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


NotifyOn = Literal["discrepancies", "dead_letters", "run_failed", "run_missed"]
NOTIFY_ON: tuple[NotifyOn, ...] = ("discrepancies", "dead_letters", "run_failed", "run_missed")
_EMAIL = r"^[^@\s<>,;]+@[^@\s<>,;]+$"
_EMAIL_KEYS = (
    "smtp_host",
    "smtp_port",
    "smtp_security",
    "username",
    "password_env",
    "sender",
    "to",
)
_HTTP_KEYS = ("url", "url_env", "signing_secret_env")


class NotifySettings(_Table):
    """A notification target (``[[notify]]``): a Slack-compatible incoming webhook, a generic JSON
    webhook (signed the Standard Webhooks way) or e-mail over SMTP."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    kind: Literal["slack", "webhook", "email"]
    on: tuple[NotifyOn, ...] = NOTIFY_ON  # what it is told about
    sources: tuple[str, ...] = ()  # only these sources' news (empty: every source)
    max_per_hour: int = Field(default=12, ge=1, le=3600)  # more is counted, not sent
    # a source's new dead letters are told at most this often (the next message counts them all)
    dead_letters_every_minutes: int = Field(default=15, ge=0, le=1440)
    max_attempts: int = Field(default=5, ge=1, le=50)
    timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    # slack, webhook: the URL, or the variable holding it (a Slack webhook URL is a secret)
    url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    url_env: str | None = None
    signing_secret_env: str | None = None  # webhook: whsec_... (comma-separated to rotate)
    # email
    smtp_host: str | None = None
    smtp_port: int = Field(default=587, ge=1, le=65535)
    smtp_security: Literal["starttls", "tls", "none"] = "starttls"
    username: str | None = None
    password_env: str | None = None
    sender: str | None = Field(default=None, alias="from", pattern=_EMAIL)
    to: tuple[str, ...] = ()

    @field_validator("on", "sources", "to", mode="before")
    @classmethod
    def _list_to_tuple(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("to")
    @classmethod
    def _addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for address in value:
            if not re.match(_EMAIL, address):
                raise ValueError(f"'{address}' is not an e-mail address")
        return value

    @model_validator(mode="after")
    def _kind_keys(self) -> NotifySettings:
        if len(set(self.on)) != len(self.on) or not self.on:
            raise ValueError(
                "'on' lists each of " + ", ".join(NOTIFY_ON) + " at most once, and one at least"
            )
        given = {k for k in self.model_fields_set}
        if self.kind == "email":
            wrong = sorted(given & set(_HTTP_KEYS))
            if wrong:
                raise ValueError(f"kind 'email' takes no key '{wrong[0]}'")
            for key in ("smtp_host", "sender", "to"):
                if not getattr(self, key):
                    raise ValueError(
                        f"kind 'email' needs key '{'from' if key == 'sender' else key}'"
                    )
            if bool(self.username) != bool(self.password_env):
                raise ValueError("username and password_env go together")
            if self.username and self.smtp_security == "none":
                raise ValueError("a password is never sent without TLS: set smtp_security")
        else:
            wrong = sorted(given & set(_EMAIL_KEYS))
            if wrong:
                raise ValueError(
                    f"kind '{self.kind}' takes no key "
                    f"'{'from' if wrong[0] == 'sender' else wrong[0]}'"
                )
            if bool(self.url) == bool(self.url_env):
                raise ValueError(f"kind '{self.kind}' needs key 'url' or 'url_env' (one of them)")
            if self.kind == "slack" and self.signing_secret_env:
                raise ValueError(
                    "kind 'slack' takes no signing_secret_env (Slack's URL is the secret)"
                )
        return self

    @property
    def _owner(self) -> str:
        return f"notify target '{self.name}'"

    def target_url(self, environ: Mapping[str, str] | None = None) -> str:
        """The URL to post to (from the file, or from the variable ``url_env`` names)."""
        if self.url:
            return self.url
        value = _env_secret(self._owner, "url_env", self.url_env, environ)
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{self._owner}: {self.url_env} does not hold an http(s) URL")
        return value

    def signing_secrets(self, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """The signing secrets (empty: messages are not signed)."""
        return _standard_secrets(
            self._owner, "signing_secret_env", self.signing_secret_env, environ
        )

    def password(self, environ: Mapping[str, str] | None = None) -> str | None:
        if not self.password_env:
            return None
        return _env_secret(self._owner, "password_env", self.password_env, environ)


class Settings(_Table):
    database: DatabaseSettings = DatabaseSettings()
    receiver: ReceiverSettings = ReceiverSettings()
    worker: WorkerSettings = WorkerSettings()
    reconcile: ReconcileSettings = ReconcileSettings()
    business: BusinessSettings = BusinessSettings()
    logging: LoggingSettings = LoggingSettings()
    dashboard: DashboardSettings = DashboardSettings()
    retention: RetentionSettings = RetentionSettings()
    prune: PruneSettings = PruneSettings()
    outbox: OutboxSettings = OutboxSettings()
    sources: tuple[SourceSettings, ...] = ()
    notify: tuple[NotifySettings, ...] = ()

    @field_validator("sources", "notify", mode="before")
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
        targets: set[str] = set()
        for target in self.notify:
            if target.name in targets:
                raise ValueError(f"notify target name '{target.name}' is used twice")
            targets.add(target.name)
            known = {src.name for src in self.sources} | {
                f"outbox:{t.name}" for t in self.outbox.targets
            }
            for name in target.sources:
                if name not in known:
                    raise ValueError(
                        f"notify target '{target.name}': source '{name}' is not configured"
                    )
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
            lines.append(escape_control(f"{origin}: {where}: {msg}"))  # a value may hold controls
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
