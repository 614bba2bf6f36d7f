"""Every kind's list connector against its strict stand-in, over loopback HTTP: it reads the window's
events in the provider's order through several pages, checks its credentials with one call and names
the variable when they are wrong, keeps to the provider's rate limit, resumes from its cursor, and
says when its window starts before the provider's retention. The stand-in refuses what the provider
refuses. Generated from the stand-ins (``standin.py`` in a provider's package)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from connectors.base import BEYOND_RETENTION, Connector, Page, ScanOptions
from connectors.errors import AuthError
from connectors.sandbox.app import Faults, Sandbox
from connectors.sandbox.standin import stand_in_class, stand_in_kinds
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.reconcile.judge import key as record_key
from reconciler.sources import build_connector
from tests.conftest import RunningServer, start_server
from tests.integration.test_every_listed_kind_reconciles import (
    environment,
    expected_key,
    source_entry,
)

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture(params=stand_in_kinds())
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    for name, value in environment(request.param).items():
        monkeypatch.setenv(name, value)
    return str(request.param)


@pytest.fixture
def box(kind: str) -> Iterator[tuple[Sandbox, RunningServer]]:
    world = build_world(
        7,
        now=NOW - timedelta(minutes=10),
        stripe_events=0,
        github_deliveries=0,
        shopify_orders=0,
        listed={kind: 23},
    )
    sandbox = Sandbox(world, stand_ins=[kind])
    server = start_server(sandbox.app)
    yield sandbox, server
    server.stop()


def connector(kind: str, url: str, **extra: Any) -> Connector:
    entry = source_entry(kind, url, **extra)
    return build_connector(parse_settings({"sources": [entry]}, "<test>").sources[0])


def scan(c: Connector, cursor: Any = None, **options: Any) -> list[Page]:
    opts = ScanOptions(now=NOW, initial_lookback=options.pop("lookback", timedelta(days=2)))
    return list(c.pages(cursor, opts))


def test_the_list_is_read_to_its_end_page_by_page(
    kind: str, box: tuple[Sandbox, RunningServer]
) -> None:
    sandbox, server = box
    c = connector(kind, server.url, page_size=4)
    try:
        pages = scan(c)
    finally:
        c.close()
    ids = [record_key(r) for p in pages for r in p.records]
    assert sorted(ids) == sorted(expected_key(kind, s) for s in sandbox.world.listed[kind])
    assert len(ids) == len(set(ids))
    assert len(pages) >= 23 // 4
    assert pages[-1].done and not any(p.done for p in pages[:-1])
    assert all(r.occurred_at is not None for p in pages for r in p.records)


def test_a_scan_resumes_from_its_cursor_and_reads_only_what_is_new(
    kind: str, box: tuple[Sandbox, RunningServer]
) -> None:
    sandbox, server = box
    c = connector(kind, server.url, page_size=4)
    try:
        pages = scan(c)
        stopped = scan(c, pages[1].cursor)  # a run that stopped after its second page
        again = scan(c, pages[-1].cursor)  # the next run: nothing new
    finally:
        c.close()
    first = [record_key(r) for p in pages[2:] for r in p.records]
    assert [record_key(r) for p in stopped for r in p.records] == first
    newest = max(s.at for s in sandbox.world.listed[kind])
    assert {record_key(r) for p in again for r in p.records} <= {
        expected_key(kind, s)
        for s in sandbox.world.listed[kind]
        if s.at >= newest - timedelta(minutes=10)
    }


def test_credentials_are_checked_with_one_call_and_the_variable_named(
    kind: str, box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, server = box
    c = connector(kind, server.url)
    try:
        before = sandbox.stats.calls
        assert c.check_access().detail
        assert sandbox.stats.calls - before <= 2  # one read (and a token, where there is one)
    finally:
        c.close()
    for name in environment(kind):
        if not name.endswith("_SIGNING"):
            monkeypatch.setenv(name, "wrong")
    c = connector(kind, server.url)
    try:
        with pytest.raises(AuthError, match=f"T_{kind.upper()}_"):
            c.check_access()
    finally:
        c.close()


def test_the_stand_in_refuses_what_the_provider_refuses(
    kind: str, box: tuple[Sandbox, RunningServer]
) -> None:
    _, server = box
    stand_in = stand_in_class(kind)
    url = f"{server.url}/{kind}{stand_in.list_path}"
    with httpx.Client() as client:
        assert client.get(url, params={"no_such_parameter": "1"}).status_code in (400, 401, 403)
        assert client.get(url).status_code in (400, 401, 403)  # no credentials


def test_the_providers_rate_limit_is_kept_to(kind: str, box: tuple[Sandbox, RunningServer]) -> None:
    sandbox, server = box
    sandbox.faults = Faults(rate_limit=4)
    c = connector(kind, server.url, page_size=2, max_requests_per_second=20)
    try:
        pages = scan(c)
    finally:
        c.close()
    assert sandbox.stats.throttled > 0  # the stand-in refused calls in the provider's shape ...
    ids = {record_key(r) for p in pages for r in p.records}
    assert ids == {expected_key(kind, s) for s in sandbox.world.listed[kind]}  # none was lost


def test_a_window_before_the_providers_retention_is_said(
    kind: str, box: tuple[Sandbox, RunningServer]
) -> None:
    _, server = box
    c = connector(kind, server.url)
    try:
        if c.retention is None:
            pytest.skip(f"{kind} documents no retention for its list")
        pages = scan(c, lookback=c.retention + timedelta(days=3))
    finally:
        c.close()
    assert pages[0].gap is not None and pages[0].gap.cause == BEYOND_RETENTION
    assert pages[0].gap.end - pages[0].gap.start >= timedelta(days=3) - timedelta(minutes=1)
    assert all(p.gap is None for p in pages[1:])


def test_doctor_checks_the_sources_credentials_with_one_read(
    kind: str, box: tuple[Sandbox, RunningServer], tmp_path: Any
) -> None:
    """``hookledger doctor`` on a config with the source: its credentials pass with one cheap call,
    and wrong ones fail naming the variable."""
    from reconciler.ops.doctor import diagnose

    sandbox, server = box
    entry = source_entry(kind, server.url)
    config = tmp_path / "config.toml"
    # JSON's strings, numbers, booleans and arrays are TOML's too
    database = f"sqlite:///{tmp_path / 'db.sqlite'}"
    lines = ["[database]", f"url = {json.dumps(database)}"]
    lines += ["[[sources]]", *(f"{key} = {json.dumps(value)}" for key, value in entry.items())]
    config.write_text("\n".join(lines) + "\n")
    env = environment(kind)
    before = sandbox.stats.calls
    verdicts = diagnose(str(config), environ=env)
    mine = [v for v in verdicts if v.check == f"source '{kind}'"]
    assert mine and all(v.status in ("pass", "warn") for v in mine), mine
    assert sandbox.stats.calls - before <= 2
    wrong = {
        name: ("wrong" if not name.endswith("_SIGNING") else value) for name, value in env.items()
    }
    failed = [v for v in diagnose(str(config), environ=wrong) if v.check == f"source '{kind}'"]
    assert any(v.status == "fail" and f"T_{kind.upper()}_" in v.detail for v in failed), failed
