"""Who is using the dashboard and whether they may act (pure).

With sign-in off, everyone who can reach the dashboard may act, and nobody is known: actions are
audited as ``anonymous@<client address>`` (a configured name would claim an identity nobody proved).
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
from reconciler.logs import escape_control


@dataclass(frozen=True)
class Identity:
    name: str
    can_act: bool
    signed_in: bool
    auth_enabled: bool


def resolve_identity(
    cfg: DashboardSettings, user: Mapping[str, Any] | None, client_address: str | None
) -> Identity:
    """``user`` is what the OIDC provider said (``st.user``), None when nobody is signed in;
    ``client_address`` the browser's address as the dashboard saw it (None: the same machine, as
    Streamlit reports a loopback address)."""
    if not cfg.auth.enabled:
        name = f"anonymous@{escape_control(client_address or '') or 'localhost'}"
        return Identity(name, can_act=True, signed_in=False, auth_enabled=False)
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
