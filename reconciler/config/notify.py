"""[[notify]]: who is told what is new, and how."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from reconciler.config.base import _env_secret, _standard_secrets, _Table
from reconciler.errors import ConfigError

NotifyOn = Literal["discrepancies", "dead_letters", "run_failed", "run_missed", "issues"]
# the default: a notice per new or reopened issue, not per failure (issue 46); "dead_letters" (a
# notice per source's batch of new dead letters) is asked for by name
NOTIFY_ON: tuple[NotifyOn, ...] = ("discrepancies", "issues", "run_failed", "run_missed")
NOTIFY_ON_ALL: tuple[NotifyOn, ...] = (*NOTIFY_ON, "dead_letters")
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
                "'on' lists each of " + ", ".join(NOTIFY_ON_ALL) + " at most once, and one at least"
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
