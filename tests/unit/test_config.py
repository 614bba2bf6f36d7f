"""Configuration: the shipped config.toml loads; bad input is named by file, table and key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.providers.shopify import ShopifyKeys
from reconciler.cli.main import main
from reconciler.config import load_config
from reconciler.errors import ConfigError
from reconciler.sources import options_of

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_config_loads_as_is() -> None:
    loaded = load_config(ROOT / "config.toml", environ={})
    s = loaded.settings
    assert s.database.url == "sqlite:///var/hookledger.db"
    assert {src.kind for src in s.sources} >= {"stripe", "github", "shopify"}
    assert s.worker.max_attempts == 8


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[worker]\nmax_atempts = 3\n", "table [worker], key 'max_atempts': unknown key"),
        ("[worker]\nmax_attempts = 'x'\n", "table [worker], key 'max_attempts'"),
        ("[nope]\na = 1\n", "table top level, key 'nope': unknown key"),
        (
            '[[sources]]\nname = "a"\n',
            "table [sources][0] (name 'a'), key 'kind': required key is missing",
        ),
        ('[[sources]]\nname = "a"\nkind = "moneygram"\n', "key 'kind'"),
        ('[[sources]]\nname = "a b"\nkind = "github"\n', "key 'name'"),
        (
            '[[sources]]\nname = "a"\nkind = "github"\nid_header = "X"\n',
            "key 'id_header' applies only to kind 'generic'",
        ),
        ('[[sources]]\nname = "a"\nkind = "generic"\n', "needs key 'signature_header'"),
        (
            '[[sources]]\nname = "a"\nkind = "github"\n[[sources]]\nname = "a"\nkind = "stripe"\n',
            "used twice",
        ),
        ("[receiver]\nport = 70000\n", "table [receiver], key 'port'"),
        (
            '[[sources]]\nname = "a"\nkind = "stripe"\nfingerprint_ignore = ["data..x"]\n',
            "key 'fingerprint_ignore': Value error, 'data..x' is not a JSON path",
        ),
        (
            '[[sources]]\nname = "a"\nkind = "stripe"\nfingerprint_ignore = [1]\n',
            "key 'fingerprint_ignore'",
        ),
        (
            '[[sources]]\nname = "a"\nkind = "stripe"\ncorrelation_header = "X Bad"\n',
            "key 'correlation_header'",
        ),
        ("not toml [", "not valid TOML"),
    ],
)
def test_invalid_config_names_file_table_and_key(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert str(path) in str(err.value)
    assert expected in str(err.value)


def test_cli_exits_2_on_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "[worker]\nbogus = 1\n")
    assert main(["init", "--config", str(path)]) == 2
    assert "key 'bogus': unknown key" in capsys.readouterr().err


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.toml", environ={})


def test_resolution_order_and_database_override(tmp_path: Path) -> None:
    path = _write(tmp_path, '[database]\nurl = "sqlite:///from-file.db"\n')
    loaded = load_config(None, environ={"HOOKLEDGER_CONFIG": str(path)})
    assert loaded.path == path
    assert loaded.settings.database.url == "sqlite:///from-file.db"
    loaded = load_config(path, environ={"HOOKLEDGER_DATABASE_URL": "sqlite:///env.db"})
    assert loaded.settings.database.url == "sqlite:///env.db"


def test_secrets_come_from_the_environment_comma_separated(tmp_path: Path) -> None:
    path = _write(
        tmp_path, '[[sources]]\nname = "s"\nkind = "github"\nsigning_secret_env = "MY_SECRET"\n'
    )
    source = load_config(path, environ={}).settings.sources[0]
    assert source.signing_secrets({"MY_SECRET": " new , old "}) == ("new", "old")
    with pytest.raises(ConfigError, match="MY_SECRET"):
        source.signing_secrets({})


@settings(max_examples=300, deadline=None)
@given(
    rate=st.one_of(
        st.integers(-10, 20_000), st.floats(allow_nan=True), st.text(max_size=5), st.booleans()
    ),
    concurrency=st.one_of(st.integers(-5, 100), st.floats(allow_nan=True), st.text(max_size=5)),
)
def test_any_request_budget_loads_within_its_limits_or_names_the_key(
    rate: object, concurrency: object
) -> None:
    """max_requests_per_second and max_concurrency: a budget the connector can use, or a
    ConfigError naming the source's table and the key, never a traceback."""
    from reconciler.config import parse_settings
    from reconciler.sources import budget_of

    source = {
        "name": "s",
        "kind": "stripe",
        "max_requests_per_second": rate,
        "max_concurrency": concurrency,
    }
    try:
        loaded = parse_settings({"sources": [source]}, "<fuzz>")
    except ConfigError as exc:
        assert all(
            line.startswith("<fuzz>: table [sources][0] (name 's'), key 'max_")
            for line in str(exc).splitlines()
        ), str(exc)
        return
    budget = budget_of(loaded.sources[0])
    assert 1 <= budget.concurrency <= 64
    assert budget.rate is None or 0 < budget.rate <= 10_000


@settings(max_examples=100, deadline=None)
@given(api=st.one_of(st.sampled_from(["graphql", "rest"]), st.text(max_size=8), st.integers()))
def test_the_shopify_api_key_is_graphql_or_rest_or_names_the_key(api: object) -> None:
    from reconciler.config import parse_settings

    source = {"name": "shop", "kind": "shopify", "api": api}
    try:
        loaded = parse_settings({"sources": [source]}, "<fuzz>")
    except ConfigError as exc:
        assert api not in ("graphql", "rest")
        assert str(exc).startswith("<fuzz>: table [sources][0] (name 'shop'), key 'api'"), str(exc)
        return
    assert options_of(loaded.sources[0], secrets=False).own(ShopifyKeys).api == api


def test_shopify_reads_through_graphql_unless_told_rest() -> None:
    from reconciler.config import parse_settings

    plain = parse_settings({"sources": [{"name": "s", "kind": "shopify"}]}, "<t>").sources[0]
    assert options_of(plain, secrets=False).own(ShopifyKeys).api == "graphql"
    with pytest.raises(ConfigError, match="key 'api'"):
        parse_settings({"sources": [{"name": "s", "kind": "stripe", "api": "rest"}]}, "<t>")


@settings(max_examples=60, deadline=None)
@given(
    fmt=st.one_of(st.sampled_from(["text", "json"]), st.text(max_size=8), st.integers()),
    public_url=st.one_of(
        st.none(),
        st.sampled_from(["https://hooks.example.com", "http://10.0.0.5:8000/"]),
        st.text(max_size=20),
    ),
)
def test_the_log_format_and_the_receivers_public_url_load_or_name_the_key(
    fmt: object, public_url: object
) -> None:
    from reconciler.config import parse_settings

    data: dict[str, Any] = {"logging": {"format": fmt}}
    if public_url is not None:
        data["receiver"] = {"public_url": public_url}
    try:
        loaded = parse_settings(data, "<fuzz>")
    except ConfigError as exc:
        for line in str(exc).splitlines():  # one line a problem, each naming its key
            assert line.startswith(
                (
                    "<fuzz>: table [logging], key 'format'",
                    "<fuzz>: table [receiver], key 'public_url'",
                )
            ), line
        return
    assert loaded.logging.format in ("text", "json") and loaded.logging.format == fmt
    url = loaded.receiver.public_url
    assert url is None or url.startswith(("http://", "https://"))


def test_the_current_slot_is_the_newest_fire_time_within_the_misfire_grace() -> None:
    from datetime import UTC, datetime

    from reconciler.config import parse_settings
    from reconciler.schedule import current_slot

    berlin = parse_settings(
        {"reconcile": {"schedule": "0 2 * * *", "timezone": "Europe/Berlin"}}, "<test>"
    )
    slot = current_slot(berlin, datetime(2026, 12, 3, 1, 30, tzinfo=UTC))  # 02:30 in Berlin
    assert slot is not None and slot.isoformat() == "2026-12-03T02:00:00+01:00"
    assert current_slot(berlin, datetime(2026, 12, 3, 3, 30, tzinfo=UTC)) is None  # past the grace
    minutely = parse_settings({"reconcile": {"schedule": "* * * * *"}}, "<test>")
    assert current_slot(minutely, datetime(2026, 12, 3, 15, 7, 42, tzinfo=UTC)) == datetime(
        2026, 12, 3, 15, 7, tzinfo=UTC
    )
    # the night Berlin's clocks go back, 02:30 comes twice (APScheduler 3 fired at both): each
    # is a slot of its own, and finding it ends (stepping local times used to loop for ever)
    twice = parse_settings(
        {"reconcile": {"schedule": "30 2 * * *", "timezone": "Europe/Berlin"}}, "<test>"
    )
    back = current_slot(twice, datetime(2026, 10, 25, 1, 45, tzinfo=UTC))  # 02:45 CET
    assert back is not None and back.isoformat() == "2026-10-25T02:30:00+01:00"


@settings(max_examples=60, deadline=None)
@given(
    port=st.one_of(st.none(), st.integers(min_value=-5, max_value=70_000), st.text(max_size=5)),
    replica=st.one_of(st.none(), st.text(max_size=30), st.integers()),
)
def test_the_worker_metrics_port_and_the_dashboard_replica_load_or_name_the_key(
    port: object, replica: object
) -> None:
    from reconciler.config import parse_settings

    data: dict[str, Any] = {
        "worker": {"metrics_port": port},
        "dashboard": {"database_url": replica},
    }
    try:
        loaded = parse_settings(data, "<fuzz>")
    except ConfigError as exc:
        for line in str(exc).splitlines():
            assert line.startswith(
                (
                    "<fuzz>: table [worker], key 'metrics_port'",
                    "<fuzz>: table [dashboard], key 'database_url'",
                )
            ), line
        return
    assert loaded.worker.metrics_port is None or 1 <= loaded.worker.metrics_port <= 65535
    assert loaded.dashboard.database_url is None or isinstance(loaded.dashboard.database_url, str)


def _number_or_junk() -> st.SearchStrategy[object]:
    return st.one_of(
        st.none(),
        st.integers(min_value=-10, max_value=200_000),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
        st.booleans(),
    )


@settings(max_examples=80, deadline=None)
@given(
    body_timeout=_number_or_junk(),
    limit=_number_or_junk(),
    lock_warn=_number_or_junk(),
    max_wait=_number_or_junk(),
)
def test_the_edge_and_patience_keys_load_or_name_the_key(
    body_timeout: object, limit: object, lock_warn: object, max_wait: object
) -> None:
    """Issue 34's keys: [receiver] body_timeout_seconds and limit_concurrency, [worker]
    sqlite_lock_warn_seconds, [reconcile] max_wait_seconds (None: the key left out)."""
    from reconciler.config import parse_settings

    values = {
        ("receiver", "body_timeout_seconds"): body_timeout,
        ("receiver", "limit_concurrency"): limit,
        ("worker", "sqlite_lock_warn_seconds"): lock_warn,
        ("reconcile", "max_wait_seconds"): max_wait,
    }
    data: dict[str, Any] = {}
    for (table, key), value in values.items():
        if value is not None:
            data.setdefault(table, {})[key] = value
    try:
        loaded = parse_settings(data, "<fuzz>")
    except ConfigError as exc:
        named = tuple(f"<fuzz>: table [{t}], key '{k}'" for t, k in values)
        for line in str(exc).splitlines():
            assert line.startswith(named), line
        return
    assert 0 < loaded.receiver.body_timeout_seconds <= 600
    assert 1 <= loaded.receiver.limit_concurrency <= 100_000
    assert loaded.worker.sqlite_lock_warn_seconds > 0
    assert 1 <= loaded.reconcile.max_wait_seconds <= 86_400


@settings(max_examples=100, deadline=None)
@given(
    kind=st.sampled_from(["discord", "discord_interactions", "stripe", "slack", "twilio", "adyen"]),
    key=st.one_of(
        st.none(),
        st.text(alphabet="0123456789abcdefABCDEFxyz", max_size=70),
        st.integers(),
        st.just("ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c"),
        st.just("00" * 32),
    ),
)
def test_a_sources_public_key_loads_or_names_the_problem(kind: str, key: object) -> None:
    """Issue 35's new source key: Discord's public key (a config value), refused elsewhere."""
    from reconciler.config import parse_settings

    source: dict[str, Any] = {"name": "s", "kind": kind}
    if key is not None:
        source["public_key"] = key
    try:
        loaded = parse_settings({"sources": [source]}, "<fuzz>")
    except ConfigError as exc:
        assert str(exc).startswith("<fuzz>: table [sources][0] (name 's')"), str(exc)
        assert "\n" not in str(exc)
        return
    if key is None:  # no key: every kind but Discord's two loads
        assert kind not in ("discord", "discord_interactions")
        return
    assert kind in ("discord", "discord_interactions") and isinstance(key, str) and len(key) == 64
    assert loaded.sources[0].public_key == key


@settings(max_examples=80, deadline=None)
@given(value=st.one_of(st.none(), st.text(max_size=30)))
def test_basic_auth_env_holds_user_and_password_or_names_the_variable(value: str | None) -> None:
    import base64

    from reconciler.config import parse_settings

    source = {"name": "pay", "kind": "adyen", "signing_secret_env": "K", "basic_auth_env": "BA"}
    settings_ = parse_settings({"sources": [source]}, "<t>")
    env = {} if value is None else {"BA": value}
    try:
        header = settings_.sources[0].basic_auth(env)
    except ConfigError as exc:
        assert "BA" in str(exc) and "\n" not in str(exc)
        assert value is None or not value.strip() or ":" not in value.strip()
        return
    assert header is not None and header.startswith("Basic ")
    assert base64.b64decode(header[6:]).decode() == (value or "").strip()


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(["handler_timeout_seconds", "max_hangs", "shutdown_grace_seconds"]),
    value=st.one_of(
        st.integers(-5, 10_000),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
        st.booleans(),
        st.none(),
        st.lists(st.integers(), max_size=2),
    ),
)
def test_any_worker_hang_setting_loads_within_its_limits_or_names_the_key(
    key: str, value: object
) -> None:
    """[worker] handler_timeout_seconds, max_hangs, shutdown_grace_seconds (issue 44): a value the
    supervisor can use, or a ConfigError naming the table and the key, never a traceback."""
    from reconciler.config import parse_settings

    try:
        worker = parse_settings({"worker": {key: value}}, "<fuzz>").worker
    except ConfigError as exc:
        assert all(
            line.startswith(f"<fuzz>: table [worker], key '{key}'")
            for line in str(exc).splitlines()
        ), str(exc)
        return
    assert worker.handler_timeout_seconds > 0
    assert worker.max_hangs >= 1 and isinstance(worker.max_hangs, int)
    assert worker.shutdown_grace_seconds >= 0
