"""The doctor's pure parts: which variables a configuration names, and how verdicts print."""

from __future__ import annotations

from reconciler.config import parse_settings
from reconciler.ops.doctor import Verdict, as_json, named_variables, render


def test_every_variable_the_file_names_is_listed_with_where_disabled_sources_left_out() -> None:
    settings = parse_settings(
        {
            "sources": [
                {"name": "s", "kind": "stripe", "api_key_env": "A", "signing_secret_env": "B"},
                {"name": "off", "kind": "stripe", "api_key_env": "C", "enabled": False},
                {"name": "gh", "kind": "github", "app_id": 1, "private_key_env": "D"},
            ],
            "outbox": {
                "targets": [{"name": "crm", "url": "https://crm.test", "signing_secret_env": "E"}]
            },
            "dashboard": {
                "auth": {
                    "enabled": True,
                    "client_id": "x",
                    "client_secret_env": "F",
                    "cookie_secret_env": "G",
                    "server_metadata_url": "https://id.test/.well-known/openid-configuration",
                }
            },
        },
        "<test>",
    )
    assert named_variables(settings) == [
        ("F", "[dashboard.auth] client_secret_env"),
        ("G", "[dashboard.auth] cookie_secret_env"),
        ("E", "[outbox.targets] 'crm' signing_secret_env"),
        ("A", "[sources] 's' api_key_env"),
        ("B", "[sources] 's' signing_secret_env"),
        ("D", "[sources] 'gh' private_key_env"),
    ]


def test_verdicts_print_a_line_each_and_a_count() -> None:
    verdicts = [
        Verdict("config", "pass", "c.toml"),
        Verdict("schema", "fail", "not initialised: run 'hookledger init'"),
        Verdict("source 's'", "warn", "a secret key"),
        Verdict("receiver", "skip", "no [receiver] public_url to check"),
    ]
    assert list(render(verdicts)) == [
        "PASS  config: c.toml",
        "FAIL  schema: not initialised: run 'hookledger init'",
        "WARN  source 's': a secret key",
        "SKIP  receiver: no [receiver] public_url to check",
        "doctor: 1 passed, 1 warning(s), 1 failed, 1 skipped",
    ]
    assert '"ok": false' in as_json(verdicts)
