"""[dashboard] and [dashboard.auth], and the payload fields masked wherever payloads are shown."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from reconciler.config.base import _Table
from reconciler.errors import ConfigError

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
    # also show the personal fields providers name (Twilio's From, To, Body), masked by default
    show_personal_fields: bool = False
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
