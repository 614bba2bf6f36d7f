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
        # a fresh database: what to do first, before the count
        "doctor: the database is not initialised: run 'hookledger init' first, then doctor",
        "doctor: 1 passed, 1 warning(s), 1 failed, 1 skipped",
    ]
    assert '"ok": false' in as_json(verdicts)


def test_the_doctor_says_what_the_worker_will_do_with_each_sources_events() -> None:
    from reconciler.ops.doctor import _handlers
    from tests.conftest import make_settings

    # the handler module registers stripe's invoice.paid; nothing anywhere registers 'lonely' (the
    # registry is the process's: other tests' modules may have registered other names)
    sources = [
        {"name": "stripe", "kind": "stripe", "signing_secret_env": "T_STRIPE_SECRET"},
        {"name": "lonely", "kind": "standard", "signing_secret_env": "T_STANDARD_SECRET"},
    ]
    sqlite = make_settings(
        "sqlite:///x.db", worker={"handlers": ["tests.handlers_for_cli"]}, sources=sources
    )
    verdicts = list(_handlers(sqlite))
    assert {v.check for v in verdicts if v.status == "warn"} == {
        "handlers of 'lonely'",
        "handlers",
    }
    [lock] = [v for v in verdicts if v.check == "handlers"]
    assert lock.detail.startswith("SQLite with handlers: a handler holds the one write lock")

    forwarding = make_settings(
        "postgresql+psycopg://h/db",
        worker={"handlers": ["tests.handlers_for_cli"], "forward_url": "http://127.0.0.1:9/in"},
        sources=sources,
    )
    assert [(v.check, v.status) for v in _handlers(forwarding)] == [("handlers", "pass")]

    missing = make_settings(
        "sqlite:///x.db", worker={"handlers": ["tests.no_such_module"]}, sources=sources
    )
    [failed] = list(_handlers(missing))
    assert (
        failed.status == "fail" and "cannot import module 'tests.no_such_module'" in failed.detail
    )
