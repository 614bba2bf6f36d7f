"""Sending one notification (the I/O edge): a POST to a Slack-compatible or generic webhook
(classified by ``reconciler.outgoing``), or an e-mail over SMTP (the standard library's smtplib).
Never raises for a failed delivery: it says whether another attempt may succeed."""

from __future__ import annotations

import hashlib
import json
import smtplib
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from connectors.standard_webhooks import standard_sign
from reconciler.config import NotifySettings
from reconciler.errors import ConfigError
from reconciler.notify.notices import Message, email_message, slack_body, webhook_body
from reconciler.outgoing import post
from reconciler.states import ErrorClass

USER_AGENT = "hookledger-notify"


@dataclass(frozen=True)
class Outcome:
    ok: bool
    retry: bool = False  # another attempt may succeed (a timeout, a 5xx, a 4xx SMTP reply)
    error: str = ""  # one line, no secret in it


def message_id(target: str, key: str) -> str:
    """The Standard Webhooks ``webhook-id``: the same on every attempt, so a receiver can drop a
    repeat."""
    return "hln_" + hashlib.sha256(f"{target}\n{key}".encode()).hexdigest()[:24]


class Sender:
    """Sends to any target; ``client`` (closed by :meth:`close` only when made here) and
    ``environ`` (where ``*_env`` variables are read) are for tests."""

    def __init__(
        self,
        client: httpx.Client | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._own = client is None
        self.client = client or httpx.Client(
            follow_redirects=False, headers={"User-Agent": USER_AGENT}
        )
        self.environ = environ

    def close(self) -> None:
        if self._own:
            self.client.close()

    def __enter__(self) -> Sender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(
        self,
        target: NotifySettings,
        key: str,
        kind: str,
        data: dict[str, Any],
        message: Message,
        now: datetime,
    ) -> Outcome:
        try:
            if target.kind == "email":
                return self._email(target, message)
            if target.kind == "slack":
                body = slack_body(message)
                return self._post(target, json.dumps(body).encode(), {})
            payload = webhook_body(kind, data, message, now)
            content = json.dumps(payload, separators=(",", ":")).encode()
            return self._post(target, content, self._signature(target, key, content, now))
        except ConfigError as exc:  # a variable unset or malformed: no attempt can succeed
            return Outcome(False, retry=False, error=str(exc))

    def _signature(
        self, target: NotifySettings, key: str, content: bytes, now: datetime
    ) -> dict[str, str]:
        secrets = target.signing_secrets(self.environ)
        if not secrets:
            return {}
        msg_id, timestamp = message_id(target.name, key), int(now.timestamp())
        return {
            "webhook-id": msg_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": " ".join(
                standard_sign(content, s, msg_id, timestamp) for s in secrets
            ),
        }

    def _post(self, target: NotifySettings, content: bytes, headers: dict[str, str]) -> Outcome:
        url = target.target_url(self.environ)
        answer = post(
            self.client,
            url,
            content,
            {"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers},
            timeout=target.timeout_seconds,
        )
        if answer.ok:
            return Outcome(True)
        # a Slack webhook's URL is its secret: an error names the variable instead
        shown = f"the URL in {target.url_env}" if target.url_env else url
        error = answer.message.replace(url, shown)
        return Outcome(False, retry=answer.error_class is not ErrorClass.PERMANENT, error=error)

    def _email(self, target: NotifySettings, message: Message) -> Outcome:
        assert target.smtp_host and target.sender  # (the settings' validator requires them)
        password = target.password(self.environ)
        mail = email_message(message, target.sender, target.to)
        where = f"SMTP {target.smtp_host}:{target.smtp_port}"
        try:
            context = ssl.create_default_context()
            smtp: smtplib.SMTP
            if target.smtp_security == "tls":
                smtp = smtplib.SMTP_SSL(
                    target.smtp_host,
                    target.smtp_port,
                    timeout=target.timeout_seconds,
                    context=context,
                )
            else:
                smtp = smtplib.SMTP(
                    target.smtp_host, target.smtp_port, timeout=target.timeout_seconds
                )
            with smtp:
                if target.smtp_security == "starttls":
                    smtp.starttls(context=context)
                if target.username and password:
                    smtp.login(target.username, password)
                refused = smtp.send_message(mail)
        except smtplib.SMTPResponseException as exc:
            # 4xx: try again later (greylisting, a full queue); 5xx: refused for good
            text = (
                exc.smtp_error.decode(errors="replace")
                if isinstance(exc.smtp_error, bytes)
                else str(exc.smtp_error)
            )
            return Outcome(
                False,
                retry=400 <= exc.smtp_code < 500,
                error=f"{where} answered {exc.smtp_code}: {text[:200]}",
            )
        except smtplib.SMTPRecipientsRefused as exc:
            codes = sorted({code for code, _ in exc.recipients.values()})
            return Outcome(
                False,
                retry=all(400 <= c < 500 for c in codes),
                error=f"{where} refused every recipient ({', '.join(map(str, codes))})",
            )
        except smtplib.SMTPNotSupportedError as exc:
            return Outcome(False, retry=False, error=f"{where}: {exc} (check smtp_security)")
        except ssl.SSLError as exc:
            return Outcome(False, retry=False, error=f"{where}: TLS failed: {exc.reason or exc}")
        except (smtplib.SMTPException, OSError) as exc:  # connection refused, timeout, hung up
            return Outcome(
                False, retry=True, error=f"{where} failed: {exc.__class__.__name__}: {exc}"
            )
        if refused:
            return Outcome(
                True, error=f"{where} refused {len(refused)} of {len(target.to)} recipients"
            )
        return Outcome(True)
