"""What a publisher sends for one attempt at one message (pure): the stored body as it is, the
writer's headers, and the publisher's own: ``Idempotency-Key`` (the same on every attempt: the
receiver recognises a retry), ``X-Correlation-Id``, the target's bearer token, and, when the target
has a signing secret, a Standard Webhooks signature (``webhook-id`` = the key, ``webhook-timestamp``,
``webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``, one per secret while a
secret is rotated), so the receiver can verify that the message is ours and fresh."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from connectors.standard_webhooks import standard_sign

USER_AGENT = "hookledger-publisher"


@dataclass(frozen=True)
class TargetAuth:
    """A target's secrets, resolved from the environment once when the publisher starts."""

    signing_secrets: Sequence[str] = ()
    bearer_token: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:  # never a secret in a log line or a traceback
        return f"TargetAuth(signing_secrets={len(self.signing_secrets)}, bearer_token=***)"


def request_headers(
    *,
    key: str,
    correlation_id: str,
    content_type: str,
    headers: Mapping[str, str],
    body: bytes,
    attempt: int,
    auth: TargetAuth,
    timestamp: int,
) -> dict[str, str]:
    out = dict(headers)
    out.update(
        {
            "Content-Type": content_type,
            "Idempotency-Key": key,
            "X-Correlation-Id": correlation_id,
            "X-Hookledger-Attempt": str(attempt),
            "User-Agent": USER_AGENT,
        }
    )
    if auth.bearer_token:
        out["Authorization"] = f"Bearer {auth.bearer_token}"
    if auth.signing_secrets:
        out["webhook-id"] = key
        out["webhook-timestamp"] = str(timestamp)
        out["webhook-signature"] = " ".join(
            standard_sign(body, secret, key, timestamp) for secret in auth.signing_secrets
        )
    return out
