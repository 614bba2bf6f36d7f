"""E-mail notifications against a real SMTP server on loopback (aiosmtpd): STARTTLS with a
certificate the client verifies, a login, and the answers that decide whether to try again."""

from __future__ import annotations

import ipaddress
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from reconciler.config import NotifySettings
from reconciler.notify.notices import render
from reconciler.notify.send import Sender
from tests.notify_sinks import free_port, smtp_sink

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def self_signed(tmp: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - timedelta(days=1))
        .not_valid_after(datetime.now(UTC) + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
        b"hookledger",
        b"s3cret",
    )
    return AuthResult(success=ok, handled=False)


def target(port: int, **kw: Any) -> NotifySettings:
    return NotifySettings.model_validate(
        {
            "name": "ops-mail",
            "kind": "email",
            "smtp_host": "127.0.0.1",
            "smtp_port": port,
            "from": "hookledger@example.com",
            "to": ["ops@example.com"],
            "timeout_seconds": 5.0,
            **kw,
        }
    )


def send(sender: Sender, settings: NotifySettings) -> Any:
    data = {"at": NOW.isoformat()}
    message = render("test", data, "http://127.0.0.1:8501")
    return sender.send(settings, "test:1", "test", data, message, NOW)


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client trusts this server only
    with smtp_sink(
        tls_context=context,
        require_starttls=True,
        authenticator=authenticate,
        auth_required=True,
    ) as (mailbox, port):
        yield mailbox, port


def test_starttls_and_a_login_deliver_the_message(
    tls_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mailbox, port = tls_server
    monkeypatch.setenv("T_SMTP_PASSWORD", "s3cret")
    with Sender() as sender:
        outcome = send(sender, target(port, username="hookledger", password_env="T_SMTP_PASSWORD"))
    assert (outcome.ok, outcome.error) == (True, "")
    [mail] = mailbox.messages
    assert mail["Subject"] == "[hookledger] test notification"
    assert "this target works" in mail.get_payload(decode=True).decode()


def test_a_wrong_password_is_refused_for_good(
    tls_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, port = tls_server
    monkeypatch.setenv("T_SMTP_PASSWORD", "wrong")
    with Sender() as sender:
        outcome = send(sender, target(port, username="hookledger", password_env="T_SMTP_PASSWORD"))
    assert (outcome.ok, outcome.retry) == (False, False)
    assert outcome.error.startswith(f"SMTP 127.0.0.1:{port} answered 535")
    assert "wrong" not in outcome.error


def test_a_certificate_the_client_does_not_trust_is_a_tls_failure(
    tls_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, port = tls_server
    (tmp_path / "other").mkdir()
    other, _ = self_signed(tmp_path / "other")
    monkeypatch.setenv("SSL_CERT_FILE", str(other))  # the client trusts another certificate only
    with Sender() as sender:
        outcome = send(sender, target(port))
    assert (outcome.ok, outcome.retry) == (False, False)
    assert outcome.error.startswith(f"SMTP 127.0.0.1:{port}: TLS failed: CERTIFICATE_VERIFY_FAILED")


def test_no_server_is_worth_another_try_and_a_missing_password_is_not() -> None:
    port = free_port()
    with Sender(environ={}) as sender:
        nobody = send(sender, target(port, smtp_security="none"))
        unset = send(sender, target(port, username="u", password_env="T_UNSET_PASSWORD"))
    assert (nobody.ok, nobody.retry) == (False, True)
    assert nobody.error.startswith(f"SMTP 127.0.0.1:{port} failed: ConnectionRefusedError")
    assert (unset.ok, unset.retry) == (False, False)
    assert unset.error == (
        "notify target 'ops-mail': environment variable T_UNSET_PASSWORD (named by password_env) "
        "is not set"
    )
