"""``hookledger doctor`` against good and broken installations: a real database (SQLite and
PostgreSQL), the sandbox's APIs over loopback, a local identity provider and receiver."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, inspect
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from connectors.sandbox.app import Sandbox
from connectors.sandbox.common import Keys
from connectors.sandbox.world import build_world
from reconciler.cli.main import main
from reconciler.ops.doctor import Verdict, diagnose
from reconciler.storage.migrate import HEAD_REVISION
from reconciler.storage.testing import scratch_postgres_schema
from tests.conftest import RunningServer, start_server

ENV = {"DOC_STRIPE": "sk_test_sandbox", "DOC_GITHUB": "ghp_sandbox", "DOC_SHOPIFY": "shpat_sandbox"}


@pytest.fixture(scope="module")
def world() -> Any:
    return build_world(3, stripe_events=30, github_deliveries=10, shopify_orders=10)


@pytest.fixture
def sandbox(world: Any) -> Iterator[tuple[Sandbox, RunningServer]]:
    box = Sandbox(world)
    server = start_server(box.app)
    yield box, server
    server.stop()


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


_CREATED: list[str] = []  # databases given a doc_invoices table, dropped after each test


@pytest.fixture(autouse=True)
def _drop_business_tables() -> Iterator[None]:
    yield
    while (
        _CREATED
    ):  # (the PostgreSQL schema is shared: test_migrations compares it with the models)
        engine = create_engine(_CREATED.pop())
        Table("doc_invoices", MetaData()).drop(engine, checkfirst=True)
        engine.dispose()


def invoices(url: str, *, columns: tuple[str, ...] = ("status", "amount_paid")) -> None:
    _CREATED.append(url)
    engine = create_engine(url)
    table = Table(
        "doc_invoices",
        MetaData(),
        Column("stripe_invoice_id", String(64), primary_key=True),
        *(Column(c, Integer if c == "amount_paid" else String(32)) for c in columns),
    )
    table.drop(engine, checkfirst=True)
    table.create(engine)
    engine.dispose()


def write_config(path: Path, db_url: str, api: str, *, extra: str = "", **over: Any) -> Path:
    dashboard = over.get("dashboard", "")
    path.write_text(
        f"""
[database]
url = "{db_url}"

[reconcile]
schedule = "30 3 * * *"
timezone = "Europe/Berlin"
{dashboard}
[[sources]]
name = "stripe"
kind = "stripe"
base_url = "{over.get("stripe_url", api)}"
api_key_env = "DOC_STRIPE"
signing_secret_env = "T_STRIPE_SECRET"
[[sources.checks]]
object_type = "invoice"
table = "{over.get("table", "doc_invoices")}"
key = "stripe_invoice_id"
fields = {{ status = "status", amount_paid = "amount_paid" }}

[[sources]]
name = "github"
kind = "github"
base_url = "{api}"
repository = "octocat/Hello-World"
hook_id = 1
api_key_env = "DOC_GITHUB"

[[sources]]
name = "shopify"
kind = "shopify"
base_url = "{api}"
api_key_env = "DOC_SHOPIFY"

[[sources]]
name = "receive-only"
kind = "standard"
signing_secret_env = "T_STANDARD_SECRET"
{extra}
"""
    )
    return path


def by_check(verdicts: list[Verdict]) -> dict[str, list[Verdict]]:
    out: dict[str, list[Verdict]] = {}
    for v in verdicts:
        out.setdefault(v.check, []).append(v)
    return out


def statuses(verdicts: list[Verdict], check: str) -> set[str]:
    return {v.status for v in verdicts if v.check == check}


def test_a_ready_installation_passes_and_says_what_it_found(
    db_url: str, sandbox: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _box, server = sandbox
    invoices(db_url)
    cfg = write_config(tmp_path / "config.toml", db_url, server.url)
    verdicts = diagnose(str(cfg))
    assert not [v for v in verdicts if v.status == "fail"], verdicts
    checks = by_check(verdicts)
    assert checks["schema"][0].detail == f"at revision {HEAD_REVISION}, the current one"
    assert checks["checks of 'stripe'"][0].detail == (
        "tables found: doc_invoices (stripe_invoice_id, status, amount_paid)"
    )
    assert checks["source 'stripe'"][0].detail == "lists events (test mode)"
    # the sandbox's key is a secret key: full access, which Stripe tells by its kind
    assert [v.status for v in checks["source 'stripe'"]] == ["pass", "warn"]
    assert "restricted key (rk_" in checks["source 'stripe'"][1].detail
    assert checks["source 'github'"] == [
        Verdict("source 'github'", "pass", "lists the hook's deliveries")
    ]
    assert checks["source 'shopify'"] == [
        Verdict("source 'shopify'", "pass", "the token reads orders")
    ]
    assert checks["source 'receive-only'"][0].status == "skip"
    assert checks["schedule"][0].detail.startswith("'30 3 * * *' in Europe/Berlin: next run ")
    assert checks["schedule"][0].detail.endswith(":30 CET")
    assert statuses(verdicts, "env DOC_STRIPE") == {"pass"}
    # the command: exit 0, a line each, and never a secret's value
    assert main(["doctor", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "PASS  source 'stripe': lists events (test mode)" in out
    assert out.strip().splitlines()[-1].startswith("doctor: ")
    assert "sk_test_sandbox" not in out and "ghp_sandbox" not in out
    assert main(["doctor", "--config", str(cfg), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is True and document["counts"]["fail"] == 0
    assert {
        "check": "schema",
        "status": "pass",
        "detail": f"at revision {HEAD_REVISION}, the current one",
    } in (document["checks"])


def test_each_broken_piece_is_one_failed_line_and_exit_2(
    db_url: str, sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    _box, server = sandbox
    invoices(db_url, columns=("status",))  # amount_paid is missing
    closed = "http://127.0.0.1:9"  # nothing listens on the discard port
    cfg = write_config(tmp_path / "config.toml", db_url, server.url, stripe_url=closed)
    monkeypatch.setenv("DOC_GITHUB", "ghp_wrong")
    monkeypatch.delenv("DOC_SHOPIFY")
    verdicts = diagnose(str(cfg))
    checks = by_check(verdicts)
    assert checks["env DOC_SHOPIFY"] == [
        Verdict("env DOC_SHOPIFY", "fail", "not set (named by [sources] 'shopify' api_key_env)")
    ]
    [stripe] = checks["source 'stripe'"]
    assert stripe.status == "fail" and "127.0.0.1:9" in stripe.detail and "\n" not in stripe.detail
    [github] = checks["source 'github'"]
    assert github.status == "fail"
    assert "rejected the credentials (HTTP 401" in github.detail and "$DOC_GITHUB" in github.detail
    assert checks["source 'shopify'"] == [
        Verdict("source 'shopify'", "skip", "not asked: DOC_SHOPIFY is not set")
    ]
    [business] = checks["checks of 'stripe'"]
    assert business.status == "fail" and "has no column 'amount_paid'" in business.detail
    assert main(["doctor", "--config", str(cfg)]) == 2
    out = capsys.readouterr().out
    assert "FAIL  source 'github': " in out and "Traceback" not in out


def test_a_missing_business_table_is_named(db_url: str, sandbox: Any, tmp_path: Path) -> None:
    _box, server = sandbox
    cfg = write_config(tmp_path / "config.toml", db_url, server.url, table="no_such_table")
    [business] = by_check(diagnose(str(cfg), offline=True))["checks of 'stripe'"]
    assert business.status == "fail"
    assert "the business database has no table 'no_such_table'" in business.detail


def test_what_a_key_may_do_beyond_reading_is_a_warning(
    world: Any, tmp_path: Path, db_url: str
) -> None:
    box = Sandbox(
        world,
        keys=Keys(github_scopes="repo, admin:repo_hook", shopify_scopes=("write_orders",)),
    )
    server = start_server(box.app)
    try:
        invoices(db_url)
        checks = by_check(diagnose(str(write_config(tmp_path / "c.toml", db_url, server.url))))
    finally:
        server.stop()
    assert [v.status for v in checks["source 'github'"]] == ["pass", "warn"]
    assert checks["source 'github'"][1].detail.startswith("the token also has the scopes repo;")
    assert [v.status for v in checks["source 'shopify'"]] == ["pass", "warn"]
    assert "may also write (write_orders)" in checks["source 'shopify'"][1].detail


def test_a_shopify_token_without_read_orders_fails(world: Any, tmp_path: Path, db_url: str) -> None:
    box = Sandbox(world, keys=Keys(shopify_scopes=("read_products",)))
    server = start_server(box.app)
    try:
        checks = by_check(diagnose(str(write_config(tmp_path / "c.toml", db_url, server.url))))
    finally:
        server.stop()
    assert checks["source 'shopify'"] == [
        Verdict(
            "source 'shopify'",
            "fail",
            "the access token lacks the read_orders scope (it has read_products); "
            "reconciliation reads with it",
        )
    ]


def test_a_database_without_the_schema_says_run_init(
    sandbox: Any, tmp_path: Path, pg_url: str
) -> None:
    _box, server = sandbox
    base = os.environ["HOOKLEDGER_TEST_POSTGRES_URL"]
    for revision, expected in (
        (None, "not initialised: run 'hookledger init'"),
        ("0012", f"at revision 0012, behind {HEAD_REVISION}: run 'hookledger init'"),
    ):
        with scratch_postgres_schema(base, prefix="hl_doctor", revision=revision) as url:
            cfg = write_config(tmp_path / "c.toml", url, server.url)
            checks = by_check(diagnose(str(cfg), offline=True))
            assert checks["schema"] == [Verdict("schema", "fail", expected)]
            assert checks["database"][0].status == "pass"
            engine = create_engine(url)
            tables = inspect(engine).get_table_names()
            engine.dispose()
            assert "alembic_version" in tables or revision is None
            assert revision is not None or tables == []  # nothing created by the doctor


def test_a_sqlite_file_that_does_not_exist_is_not_created(sandbox: Any, tmp_path: Path) -> None:
    _box, server = sandbox
    db = tmp_path / "var" / "hookledger.db"
    cfg = write_config(tmp_path / "c.toml", f"sqlite:///{db}", server.url)
    checks = by_check(diagnose(str(cfg), offline=True))
    assert checks["database"] == [
        Verdict("database", "fail", f"no SQLite file at {db}: run 'hookledger init'")
    ]
    assert not db.exists() and not db.parent.exists()
    assert checks["checks of 'stripe'"][0].status == "skip"


def test_an_unreachable_database_is_one_line(sandbox: Any, tmp_path: Path) -> None:
    _box, server = sandbox
    url = "postgresql+psycopg://nobody:s3cret@127.0.0.1:9/none"
    cfg = write_config(tmp_path / "c.toml", url, server.url)
    [database] = by_check(diagnose(str(cfg), offline=True))["database"]
    assert database.status == "fail" and database.detail.startswith("database postgresql")
    assert "s3cret" not in database.detail and "***" in database.detail


def test_a_configuration_that_does_not_load_is_the_only_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[database\nurl = 1\n")
    assert diagnose(str(bad)) == [
        Verdict("config", "fail", diagnose(str(bad))[0].detail)
    ]  # (deterministic)
    assert main(["doctor", "--config", str(bad), "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is False
    [only] = document["checks"]
    assert only["check"] == "config" and str(bad) in only["detail"]


def _identity_provider(good: bool) -> Any:
    async def metadata(request: Any) -> Any:
        if not good:
            return PlainTextResponse("<html>login</html>")
        return JSONResponse(
            {
                "issuer": "https://id.example.test",
                "authorization_endpoint": "https://id.example.test/auth",
                "token_endpoint": "https://id.example.test/token",
            }
        )

    async def healthz(request: Any) -> Any:
        return PlainTextResponse("ok")

    return Starlette(
        routes=[
            Route("/.well-known/openid-configuration", metadata),
            Route("/healthz", healthz),
        ]
    )


@pytest.mark.parametrize("good", [True, False])
def test_dashboard_sign_in_and_the_receivers_public_url(
    good: bool, sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _box, server = sandbox
    idp = start_server(_identity_provider(good))
    monkeypatch.setenv("DOC_OIDC_SECRET", "x")
    monkeypatch.setenv("DOC_COOKIE", "y")
    public = idp.url if good else "http://127.0.0.1:9"
    dashboard = f"""
[receiver]
public_url = "{public}"

[dashboard]
host = "0.0.0.0"

[dashboard.auth]
enabled = true
operators = ["ops@example.test"]
client_id = "hookledger"
client_secret_env = "DOC_OIDC_SECRET"
cookie_secret_env = "DOC_COOKIE"
server_metadata_url = "{idp.url}/.well-known/openid-configuration"
"""
    try:
        cfg = write_config(tmp_path / "c.toml", "sqlite://", server.url, dashboard=dashboard)
        checks = by_check(diagnose(str(cfg)))
        offline = by_check(diagnose(str(cfg), offline=True))
    finally:
        idp.stop()
    sign_in = [v for v in checks["dashboard sign-in"] if "Authlib" not in v.detail]
    receiver = checks["receiver"][0]
    if good:
        assert sign_in == [
            Verdict("dashboard sign-in", "pass", "identity provider https://id.example.test")
        ]
        assert receiver == Verdict("receiver", "pass", f"GET {idp.url}/healthz answered 200")
    else:
        assert [v.status for v in sign_in] == ["fail"]
        assert "without an OpenID configuration" in sign_in[0].detail
        assert receiver.status == "fail" and "127.0.0.1:9/healthz" in receiver.detail
    assert offline["receiver"][0].status == "skip"
    assert statuses(verdicts=diagnose(str(cfg), offline=True), check="env DOC_COOKIE") == {"pass"}


def test_a_dashboard_open_to_the_network_without_sign_in_is_a_warning(
    sandbox: Any, tmp_path: Path
) -> None:
    _box, server = sandbox
    dashboard = '[dashboard]\nhost = "0.0.0.0"\n'
    cfg = write_config(tmp_path / "c.toml", "sqlite://", server.url, dashboard=dashboard)
    [verdict] = by_check(diagnose(str(cfg), offline=True))["dashboard sign-in"]
    assert verdict.status == "warn" and "anyone who reaches it" in verdict.detail


# -- a hostile provider: whatever it answers, one line a source and no traceback ------------------

_bodies = st.one_of(
    st.binary(max_size=200),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
        max_leaves=12,
    ).map(lambda v: json.dumps(v).encode()),
    st.sampled_from(
        [
            b'{"access_scopes": [{"handle": 3}, "x", {"handle": "read_orders"}]}',
            b'{"data": [{"id": "evt_1", "livemode": "yes"}], "has_more": false}',
            b'[{"guid": "g", "id": 1}, {"guid": null}]',
            b'{"items": [{"id": {"nested": 1}}]}',
        ]
    ),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(status=st.sampled_from([200, 201, 301, 400, 401, 403, 404, 429, 500, 503]), body=_bodies)
def test_any_provider_answer_is_one_verdict_line(status: int, body: bytes, tmp_path: Path) -> None:
    import httpx

    from connectors.http import RetryPolicy
    from reconciler.sources import build_connector

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers={"content-type": "application/json"})

    def factory(source: Any) -> Any:
        return build_connector(
            source,
            transport=httpx.MockTransport(answer),
            policy=RetryPolicy(max_attempts=1),
            sleep=lambda _s: None,
        )

    extra = """
[[sources]]
name = "acme"
kind = "generic"
base_url = "http://acme.test"
api_key_env = "DOC_STRIPE"
signing_secret_env = "T_GENERIC_SECRET"
signature_header = "X-Acme-Signature"
id_json_path = "meta.id"
list_url = "http://acme.test/events"
items_path = "items"
id_path = "id"
"""
    cfg = write_config(tmp_path / "h.toml", "sqlite://", "http://api.test", extra=extra)
    verdicts = diagnose(str(cfg), connector_factory=factory)
    sources = [v for v in verdicts if v.check.startswith("source '")]
    assert verdicts[0].status == "pass", verdicts[0]
    assert {v.check for v in sources} >= {"source 'stripe'", "source 'github'", "source 'acme'"}
    for v in sources:
        assert v.status in ("pass", "warn", "fail", "skip") and "\n" not in v.detail and v.detail


def test_the_dashboards_read_replica_is_checked_too(
    db_url: str, sandbox: Any, tmp_path: Path
) -> None:
    _box, server = sandbox
    missing = tmp_path / "replica.db"
    for replica, expected in (
        (db_url, [("dashboard database", "pass"), ("dashboard database schema", "pass")]),
        (f"sqlite:///{missing}", [("dashboard database", "fail")]),
    ):
        dashboard = f'[dashboard]\ndatabase_url = "{replica}"\n'
        cfg = write_config(tmp_path / "c.toml", db_url, server.url, dashboard=dashboard)
        verdicts = diagnose(str(cfg), offline=True)
        got = [(v.check, v.status) for v in verdicts if v.check.startswith("dashboard database")]
        assert got == expected
    assert not missing.exists()


def test_a_schema_newer_than_this_release_is_a_warning_and_commands_still_run(
    tmp_path: Path, db_url: str, sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rolling upgrade: one host ran a newer release's `hookledger init`; this older host's
    doctor warns (upgrade this host) instead of failing, and its commands keep running."""
    from sqlalchemy import text

    from reconciler.cli.main import main

    _box, server = sandbox
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffffffffffff'"))
    try:
        cfg = write_config(tmp_path / "c.toml", db_url, server.url)
        checks = by_check(diagnose(str(cfg), offline=True))
        assert checks["schema"] == [
            Verdict(
                "schema",
                "warn",
                f"schema is newer than this release (ffffffffffff > {HEAD_REVISION}): upgrade "
                'this host (docs/operations.md, "Upgrading")',
            )
        ]
        assert main(["events", "list", "--config", str(cfg)]) == 0
        assert "no event matches" in capsys.readouterr().out
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"UPDATE alembic_version SET version_num = '{HEAD_REVISION}'"))
        engine.dispose()
