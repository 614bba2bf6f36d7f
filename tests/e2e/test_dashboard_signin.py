"""Signing in and out comes back to the pasted link (headless Chromium against a real ``hookledger
dashboard`` process and a small OpenID provider on loopback); a signed-in user who is not an
operator reads only, and the server refuses their action (AppTest: a browser never shows them one)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import Engine, select
from streamlit.testing.v1 import AppTest

from reconciler.storage.engine import make_engine
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import AUDIT_LOG, DISCREPANCIES
from tests.dashboard_data import AUTH, seed, write_config
from tests.e2e.test_dashboard_e2e import (
    CHROMIUM,
    LAUNCH_ARGS,
    _settled,
    _shot,
    playwright_api,
    running_dashboard,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}"),
]
CLIENT_ID, CLIENT_SECRET = "hookledger", "oidc-client-secret"
ENV = {
    "T_STRIPE_SECRET": "whsec_x",
    "T_GITHUB_SECRET": "x",
    "T_SHOPIFY_SECRET": "x",
    "T_OIDC_SECRET": CLIENT_SECRET,
    "T_COOKIE_SECRET": "a-cookie-secret-long-enough-for-hs256",
}
OPERATOR = {"sub": "u-ops", "email": "ops@example.com", "email_verified": True}
VIEWER = {"sub": "u-viewer", "email": "viewer@example.com", "email_verified": True}
AUTHORIZE_PARAMETERS = {
    *("response_type", "client_id", "redirect_uri", "scope", "state", "nonce", "prompt"),
    *("code_challenge", "code_challenge_method"),
}
APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


@dataclass
class Provider:
    """An OpenID provider that signs in ``user`` at once: discovery, an authorize endpoint that
    redirects straight back with a code, a token endpoint that answers an RS256 id_token, a JWKS.
    It refuses what a real provider refuses: unknown parameters, another client, another redirect
    URI, a code used twice, a PKCE verifier that does not match."""

    redirect_uri: str = ""
    user: dict[str, Any] = field(default_factory=lambda: dict(OPERATOR))
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    issuer: str = ""

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        }

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}

    def authorize(self, query: dict[str, list[str]]) -> str:
        """The redirect back to the app (raises ValueError for a request to refuse)."""
        q = {k: v[0] for k, v in query.items()}
        if unknown := set(q) - AUTHORIZE_PARAMETERS:
            raise ValueError(f"unknown parameters {sorted(unknown)}")
        if q.get("response_type") != "code" or q.get("client_id") != CLIENT_ID:
            raise ValueError("not this client's code flow")
        if q.get("redirect_uri") != self.redirect_uri or "openid" not in q.get("scope", "").split():
            raise ValueError("another redirect_uri, or no openid scope")
        if not q.get("state") or not q.get("nonce") or q.get("code_challenge_method") != "S256":
            raise ValueError("state, nonce and an S256 code challenge are required")
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"user": dict(self.user), "nonce": q["nonce"], **q}
        return f"{self.redirect_uri}?{urlencode({'code': code, 'state': q['state']})}"

    def token(self, form: dict[str, list[str]], authorization: str) -> dict[str, Any]:
        f = {k: v[0] for k, v in form.items()}
        client = [f.pop("client_id", None), f.pop("client_secret", None)]
        if authorization.startswith("Basic "):  # client_secret_basic, Authlib's default
            client = base64.b64decode(authorization[6:]).decode().split(":", 1)
        if client != [CLIENT_ID, CLIENT_SECRET]:
            raise ValueError("client authentication failed")
        if set(f) != {"grant_type", "code", "redirect_uri", "code_verifier"}:
            raise ValueError(f"unexpected token request {sorted(f)}")
        grant = self.codes.pop(f["code"], None)  # a code works once
        if f["grant_type"] != "authorization_code" or grant is None:
            raise ValueError("invalid_grant")
        digest = hashlib.sha256(f["code_verifier"].encode()).digest()
        challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        if challenge != grant["code_challenge"] or f["redirect_uri"] != grant["redirect_uri"]:
            raise ValueError("PKCE verifier or redirect_uri does not match")
        now = int(time.time())
        claims = {
            **grant["user"],
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "iat": now,
            "exp": now + 300,
            "nonce": grant["nonce"],
        }
        id_token = jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "k1"})
        return {
            "access_token": secrets.token_urlsafe(16),
            "token_type": "Bearer",
            "expires_in": 300,
            "id_token": id_token,
        }


def _handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: dict[str, Any], location: str | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/.well-known/openid-configuration":
                self._send(200, provider.metadata())
            elif url.path == "/jwks":
                self._send(200, provider.jwks())
            elif url.path == "/authorize":
                try:
                    self._send(302, {}, provider.authorize(parse_qs(url.query)))
                except ValueError as exc:
                    provider.refused.append(str(exc))
                    self._send(400, {"error": "invalid_request", "error_description": str(exc)})
            else:
                self._send(404, {"error": "not_found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(length).decode())
            if urlsplit(self.path).path != "/token":
                self._send(404, {"error": "not_found"})
                return
            try:
                self._send(200, provider.token(form, self.headers.get("Authorization") or ""))
            except ValueError as exc:
                provider.refused.append(str(exc))
                self._send(400, {"error": "invalid_grant", "error_description": str(exc)})

    return Handler


@pytest.fixture
def provider() -> Iterator[Provider]:
    found = Provider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(found))
    found.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _database(url: str) -> tuple[str, int]:
    """The seeded history on PostgreSQL (``pg_db``), and its diverged discrepancy's id."""
    engine = make_engine(url)
    upgrade(engine)
    seed(engine)
    with engine.connect() as conn:
        diverged = conn.execute(
            select(DISCREPANCIES.c.id).where(DISCREPANCIES.c.kind == "diverged")
        ).scalar_one()
    engine.dispose()
    return url, int(diverged)


def _auth_table(provider: Provider) -> str:
    """The tests' [dashboard.auth] table, its provider this one."""
    assert "http://127.0.0.1:9/" in AUTH
    return AUTH.replace("http://127.0.0.1:9", provider.issuer)


def _same(link: str) -> re.Pattern[str]:
    """``link`` as pasted, plus whatever the page adds to its URL after it (its own state)."""
    return re.compile(rf"^{re.escape(link)}(&.*)?$")


def _cookie_cleared(page: Any) -> None:
    page.wait_for_function("() => !document.cookie.includes('hookledger_return=')")


def _audit(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        rows = conn.execute(select(AUDIT_LOG.c.actor, AUDIT_LOG.c.action, AUDIT_LOG.c.reason))
        return [tuple(r) for r in rows]


def test_signing_in_and_out_comes_back_to_the_pasted_link(
    tmp_path: Path, provider: Provider, pg_db: str
) -> None:
    url, did = _database(pg_db)
    config = write_config(tmp_path, url, dashboard_extra=_auth_table(provider))
    expect = playwright_api.expect
    with running_dashboard(config, tmp_path, ENV) as base:
        provider.redirect_uri = f"{base}/oauth2callback"
        link = f"{base}/discrepancies?id={did}"
        with playwright_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            context = browser.new_context(viewport={"width": 1500, "height": 1100})
            page = context.new_page()
            page.set_default_timeout(30_000)
            sidebar = page.get_by_test_id("stSidebar")
            heading = page.get_by_role("heading", name=f"Discrepancy #{did}:")
            try:
                # signed out, a pasted link: the discrepancy, read-only
                page.goto(link)
                expect(heading).to_be_visible()
                expect(sidebar.get_by_text("Read-only: sign in to act.")).to_be_visible()
                expect(page.get_by_text("Read-only view: actions need an operator")).to_be_visible()
                expect(page.get_by_text('"paid"').first).to_be_visible()  # what the source says
                _settled(page)
                _shot(page, "signin-1-signed-out")

                # sign in as an operator: back on that link, and the operator acts
                sidebar.get_by_role("button", name="Sign in").click()
                expect(sidebar.get_by_text("Acting as ops@example.com")).to_be_visible()
                expect(page).to_have_url(_same(link))
                expect(heading).to_be_visible()
                _settled(page)
                _shot(page, "signin-2-operator-back-on-the-link")
                _cookie_cleared(page)
                form = page.get_by_test_id("stForm").filter(has_text="Yes, apply this action")
                form.get_by_label("Reason (required").fill("checked after signing in")
                form.get_by_text("Yes, apply this action to discrepancy").click()
                form.get_by_role("button", name="Apply").click()
                expect(page.get_by_text("processed → pending")).to_be_visible()
                expect(page).to_have_url(_same(link))

                # sign out: the same link, read-only again
                _settled(page)
                sidebar.get_by_role("button", name="Sign out").click()
                expect(sidebar.get_by_text("Read-only: sign in to act.")).to_be_visible()
                expect(page).to_have_url(_same(link))
                expect(heading).to_be_visible()
                expect(page.get_by_text("Read-only view: actions need an operator")).to_be_visible()
                _settled(page)
                _shot(page, "signin-3-signed-out-on-the-same-link")

                # someone who is not an operator, from an event permalink: back on it, read-only
                provider.user = dict(VIEWER)
                event_link = f"{base}/events?source=stripe&event_id=evt_2"
                page.goto(event_link)
                expect(page.get_by_role("heading", name=re.compile(r"\bevt_2$"))).to_be_visible()
                _settled(page)
                sidebar.get_by_role("button", name="Sign in").click()
                expect(sidebar.get_by_text("viewer@example.com (read-only)")).to_be_visible()
                expect(page).to_have_url(_same(event_link))
                expect(page.get_by_role("heading", name=re.compile(r"\bevt_2$"))).to_be_visible()
                expect(page.get_by_text("Read-only view: replay needs an operator")).to_be_visible()
                expect(page.get_by_role("button", name="Replay")).to_have_count(0)
                _settled(page)
                _shot(page, "signin-4-viewer-read-only")
            finally:
                browser.close()
    engine = make_engine(url)
    try:
        assert _audit(engine) == [("ops@example.com", "replay", "checked after signing in")]
    finally:
        engine.dispose()
    assert provider.refused == []


PLANTED = [
    "https://evil.example/",
    "//evil.example/events",
    "javascript:alert(1)",
    "/oauth2callback",
]


def test_a_planted_link_lands_on_the_overview(
    tmp_path: Path, provider: Provider, pg_db: str
) -> None:
    """Anyone can set the cookie: a link that is not one of the app's pages opens the Overview; a
    page's link planted the same way opens it (the cookie is what is followed)."""
    url, _ = _database(pg_db)
    config = write_config(tmp_path, url, dashboard_extra=_auth_table(provider))
    expect = playwright_api.expect
    with (
        running_dashboard(config, tmp_path, ENV) as base,
        playwright_api.sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            for stored, heading, landed in [
                *((s, "Overview", rf"^{re.escape(base)}/(\?.*)?$") for s in PLANTED),
                ("%2Fruns", "Runs", rf"^{re.escape(base)}/runs(\?.*)?$"),
            ]:
                context = browser.new_context()
                cookie = {"name": "hookledger_return", "value": stored, "url": f"{base}/"}
                context.add_cookies([cookie])  # type: ignore[list-item]
                page = context.new_page()
                page.goto(f"{base}/")
                expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
                _settled(page)
                expect(page).to_have_url(re.compile(landed))
                _cookie_cleared(page)
                context.close()
        finally:
            browser.close()


def test_the_server_refuses_an_action_of_a_user_who_is_not_an_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The form an operator opened, submitted by a user the provider says is not one (as a forged
    or stale request would): the server runs no action and writes nothing."""
    url, did = _database(f"sqlite:///{tmp_path / 'signin.db'}")  # (the browser tests: PostgreSQL)
    monkeypatch.setenv("HOOKLEDGER_CONFIG", str(write_config(tmp_path, url, auth=True)))
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    at = AppTest.from_file(APP, default_timeout=60)
    at.user = {**OPERATOR, "is_logged_in": True}
    at.switch_page("views/discrepancies.py")
    at.query_params["id"] = str(did)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Acting as **ops@example.com**" in c.value for c in at.sidebar.caption)
    at.text_input(key="d_reason").input("not mine to do")
    at.checkbox(key="d_confirm").check()
    at.user = {**VIEWER, "is_logged_in": True}
    next(b for b in at.button if b.label == "Apply").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("viewer@example.com (read-only)" in c.value for c in at.sidebar.caption)
    assert any("Read-only view: actions need an operator" in i.value for i in at.info)
    assert not [b for b in at.button if b.label == "Apply"]
    engine = make_engine(url)
    try:
        assert _audit(engine) == []
        with engine.connect() as conn:
            status = conn.execute(
                select(DISCREPANCIES.c.status).where(DISCREPANCIES.c.id == did)
            ).scalar_one()
        assert str(status) == "open"
    finally:
        engine.dispose()
