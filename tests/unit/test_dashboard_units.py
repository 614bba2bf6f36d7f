"""Pure parts of the dashboard: time ranges and buckets, masking, identity and permissions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.config import DashboardSettings, parse_settings
from reconciler.errors import ActionRefusedError
from reconciler.ops.identity import require_operator, resolve_identity
from reconciler.ops.masking import MASK, Masker
from reconciler.ops.timerange import (
    TimeRange,
    bucket_index,
    bucket_indexes,
    bucket_start,
    choose_bucket,
    preset,
)

NOW = datetime(2026, 11, 30, 12, 34, 56, tzinfo=UTC)


@pytest.mark.parametrize(
    "name,width,count",
    [
        ("Last hour", 60, 61),
        ("Last 24 hours", 900, 97),
        ("Last 7 days", 3600, 169),
        ("Last 30 days", 6 * 3600, 121),
    ],
)
def test_presets_choose_a_bucket_that_draws_at_most_200_bars(
    name: str, width: int, count: int
) -> None:
    rng = preset(name, NOW)
    assert rng.end == NOW
    assert choose_bucket(rng) == width
    assert len(list(bucket_indexes(rng, width))) == count


def test_buckets_are_aligned_to_the_epoch_and_cover_the_range() -> None:
    rng = TimeRange(NOW - timedelta(hours=2), NOW)
    idx = list(bucket_indexes(rng, 3600))
    assert bucket_start(idx[0], 3600) <= rng.start < bucket_start(idx[0] + 1, 3600)
    assert bucket_start(idx[-1], 3600) < rng.end
    assert bucket_start(bucket_index(NOW, 900), 900) == datetime(2026, 11, 30, 12, 30, tzinfo=UTC)


def test_bad_ranges_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="before it starts"):
        TimeRange(NOW, NOW - timedelta(seconds=1))
    with pytest.raises(ValueError, match="timezone-aware"):
        TimeRange(datetime(2026, 1, 1), datetime(2026, 1, 2))
    with pytest.raises(ValueError, match="unknown range"):
        preset("Last fortnight", NOW)


def test_masking_hides_secrets_everywhere_and_configured_pii() -> None:
    masker = Masker(["email", "billing_details"])
    body = {
        "id": "evt_1",
        "data": {
            "object": {
                "customer_email": "keep@example.com",  # not configured: shown
                "email": "jane@example.com",
                "client_secret": "pi_123_secret_456",
                "billing_details": {"name": "Jane", "address": {"line1": "1 Main St"}},
                "items": [{"apiKey": "sk_live_x", "Access-Token": "t"}, {"amount": 5}],
                "token": None,
            }
        },
    }
    shown = json.loads(masker.mask_body(json.dumps(body).encode()))
    obj = shown["data"]["object"]
    assert obj["customer_email"] == "keep@example.com"
    assert obj["email"] == MASK and obj["client_secret"] == MASK
    assert obj["billing_details"] == MASK
    assert obj["items"] == [{"apiKey": MASK, "Access-Token": MASK}, {"amount": 5}]
    assert obj["token"] is None and shown["id"] == "evt_1"
    assert "jane@" not in masker.mask_body(json.dumps(body).encode())
    assert masker.mask_body(b"\x00not json").startswith("<9 bytes, neither JSON nor a form")


def _dashboard(**auth: object) -> DashboardSettings:
    data: dict[str, object] = {"dashboard": {"operator": "night-shift"}}
    if auth:
        data["dashboard"] = {
            "auth": {
                "enabled": True,
                "client_id": "c",
                "client_secret_env": "X",
                "cookie_secret_env": "Y",
                "server_metadata_url": "https://idp.example/.well-known/openid-configuration",
                **auth,
            }
        }
    return parse_settings(data, "<test>").dashboard


def test_without_sign_in_anyone_acts_and_is_audited_by_address_not_the_configured_name() -> None:
    who = resolve_identity(_dashboard(), None, "10.1.2.3")
    assert (who.name, who.can_act, who.signed_in) == ("anonymous@10.1.2.3", True, False)
    assert require_operator(who) == "anonymous@10.1.2.3"
    assert resolve_identity(_dashboard(), None, None).name == "anonymous@localhost"
    # an address is the browser's to choose behind some proxies: it cannot forge a log line
    assert (
        resolve_identity(_dashboard(), None, "1.2.3.4\nforged").name
        == "anonymous@1.2.3.4\\x0aforged"
    )


def test_with_sign_in_only_listed_operators_act() -> None:
    cfg = _dashboard(operators=["Ops@Example.com"])
    anonymous = resolve_identity(cfg, None, "os-user")
    viewer = resolve_identity(cfg, {"is_logged_in": True, "email": "dev@example.com"}, "x")
    operator = resolve_identity(
        cfg, {"is_logged_in": True, "email": "ops@example.com", "email_verified": True}, "x"
    )
    assert not anonymous.can_act and not viewer.can_act and operator.can_act
    with pytest.raises(ActionRefusedError, match=r"dev@example\.com may not act"):
        require_operator(viewer)
    with pytest.raises(ActionRefusedError, match="anonymous"):
        require_operator(anonymous)
    assert require_operator(operator) == "ops@example.com"


@pytest.mark.parametrize(
    ("claims", "can_act"),
    [
        ({"email": "ops@example.com", "email_verified": True}, True),
        ({"email": "ops@example.com", "email_verified": "true"}, True),  # some providers send text
        ({"email": "ops@example.com"}, False),  # unverified: anyone could have typed it
        ({"email": "ops@example.com", "email_verified": False}, False),
        ({"email": "ops@example.com", "email_verified": "false", "sub": "u-42"}, True),  # subject
        ({"sub": "U-42"}, True),
        ({"sub": "u-7", "email": "x@example.com", "email_verified": True}, False),
    ],
)
def test_operators_are_matched_on_a_verified_email_or_the_subject(
    claims: dict[str, object], can_act: bool
) -> None:
    cfg = _dashboard(operators=["Ops@Example.com", "u-42"])
    assert resolve_identity(cfg, {"is_logged_in": True, **claims}, "x").can_act is can_act


def test_sign_in_settings_must_be_complete() -> None:
    from reconciler.errors import ConfigError

    with pytest.raises(ConfigError, match="client_id"):
        parse_settings({"dashboard": {"auth": {"enabled": True}}}, "config.toml")


def test_sign_in_secrets_come_from_the_environment_into_a_private_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stat
    import tomllib

    from reconciler.dashboard_process import streamlit_argv, write_auth_secrets
    from reconciler.errors import ConfigError

    settings = parse_settings(
        {
            "dashboard": {
                "auth": {
                    "enabled": True,
                    "operators": ["ops@example.com"],
                    "client_id": "hookledger",
                    "client_secret_env": "T_OIDC_SECRET",
                    "cookie_secret_env": "T_COOKIE",
                    "server_metadata_url": "https://idp.example/.well-known/openid-configuration",
                }
            }
        },
        "config.toml",
    )
    monkeypatch.delenv("T_COOKIE", raising=False)
    with pytest.raises(ConfigError, match="T_COOKIE is not set"):
        write_auth_secrets(settings, "127.0.0.1", 8501, tmp_path)
    monkeypatch.setenv("T_OIDC_SECRET", 's3cr"et')
    monkeypatch.setenv("T_COOKIE", "cookie-secret")
    path = write_auth_secrets(settings, "127.0.0.1", 8502, tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    auth = tomllib.loads(path.read_text())["auth"]
    assert auth == {
        "redirect_uri": "http://127.0.0.1:8502/oauth2callback",
        "cookie_secret": "cookie-secret",
        "client_id": "hookledger",
        "client_secret": 's3cr"et',
        "server_metadata_url": "https://idp.example/.well-known/openid-configuration",
    }
    argv = streamlit_argv("127.0.0.1", 8502, path)
    assert argv[argv.index("--secrets.files") + 1] == str(path)
    assert argv[argv.index("--server.address") + 1] == "127.0.0.1"


@pytest.mark.parametrize(
    ("value", "hidden"),
    [
        ("4242424242424242", True),
        ("4242 4242 4242 4242", True),
        ("4000-0566-5566-5556", True),
        ("4242424242424241", False),  # fails the Luhn check
        ("DE89370400440532013000", True),
        ("DE89 3704 0044 0532 0130 00", True),
        ("DE89370400440532013001", False),  # fails mod 97
        ("evt_1NvZ", False),
        ("820982911946154508", False),
        ("2026-12-01", False),
    ],
)
def test_payment_data_is_masked_by_value_under_any_key(value: str, hidden: bool) -> None:
    from reconciler.ops.masking import MASK, Masker

    masked = Masker().mask({"anything": value, "n": 4242424242424242})
    assert (masked["anything"] == MASK) is hidden
    assert masked["n"] == 4242424242424242  # JSON numbers (ids) are never touched
