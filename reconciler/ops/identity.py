"""Who is using the dashboard and whether they may act (pure).

With sign-in off, everyone who can reach the dashboard is the configured operator (or the OS user).
With sign-in on, only a signed-in user listed in ``[dashboard.auth] operators`` may act (by an e-mail
the provider verified, ``email_verified``, or by the OIDC subject ``sub``); everyone else gets a
read-only view, and every action checks again on the server (:func:`require_operator`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.config import DashboardSettings
from reconciler.errors import ActionRefusedError


@dataclass(frozen=True)
class Identity:
    name: str
    can_act: bool
    signed_in: bool
    auth_enabled: bool


def resolve_identity(
    cfg: DashboardSettings, user: Mapping[str, Any] | None, fallback: str
) -> Identity:
    """``user`` is what the OIDC provider said (``st.user``), None when nobody is signed in."""
    if not cfg.auth.enabled:
        return Identity(cfg.operator or fallback, can_act=True, signed_in=False, auth_enabled=False)
    if not user or not user.get("is_logged_in", True):
        return Identity("anonymous", can_act=False, signed_in=False, auth_enabled=True)
    email = str(user.get("email") or "")
    subject = str(user.get("sub") or "")
    name = email or subject or "unknown"
    allowed = {o.strip().lower() for o in cfg.auth.operators}
    # An e-mail counts only when the provider verified it: many providers let a user type any
    # address, and an unverified one naming an operator must not make its holder one.
    verified = user.get("email_verified") in (True, "true", "True")
    can_act = bool(
        (email and verified and email.lower() in allowed)
        or (subject and subject.lower() in allowed)
    )
    return Identity(name, can_act=can_act, signed_in=True, auth_enabled=True)


def require_operator(identity: Identity) -> str:
    """The actor name to audit, or :class:`ActionRefusedError` for a read-only user."""
    if not identity.can_act:
        who = identity.name if identity.signed_in else "an anonymous user"
        raise ActionRefusedError(
            f"{who} may not act on this dashboard: ask for a place in [dashboard.auth] operators"
        )
    return identity.name
