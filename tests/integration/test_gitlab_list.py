"""GitLab's webhook event log: python-gitlab (GitLab's Python client) pages the sandbox's stand-in
and reads the same deliveries, in the same order, as hookledger's connector; the log's quirks
(``per_page`` at most 20, offset pages, 7 days), the group variant, resending, backfill from the
log, and hostile log items.

python-gitlab 8.6 has no call for hook events (its ``ProjectHook`` manages hooks only), so the SDK
side is its generic ``Gitlab.http_list(path, iterator=True)``, which follows GitLab's ``Link``
header as every python-gitlab list does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import gitlab
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from connectors.base import Record, ScanOptions
from connectors.errors import AuthError, MalformedResponseError, NotFoundError
from connectors.http import ProviderClient
from connectors.providers.gitlab.api import (
    GitLabHookEvents,
    as_delivery,
    events_path,
    rule,
)
from connectors.providers.gitlab.standin import (
    GROUP_HOOK_ID,
    GROUP_ID,
    GUEST_TOKEN,
    HOOK_ID,
    PROJECT_ID,
    PROJECT_PATH,
    TOKEN,
    GitLabStandIn,
)
from connectors.registry import provider
from connectors.sandbox.app import Sandbox
from connectors.sandbox.world import build_world
from reconciler.config import parse_settings
from reconciler.inbox.receiver import create_app
from reconciler.reconcile.repair import backfill
from reconciler.reconcile.run import Reconciler
from reconciler.sources import build_connector, options_of
from reconciler.storage.models import DISCREPANCIES
from tests.conftest import RunningServer, start_server
from tests.integration.test_every_listed_kind_reconciles import deliver, environment, source_entry
from tests.strategies import JSON_VALUES

NOW = datetime.now(UTC).replace(microsecond=0)
EVENTS = f"/projects/{quote(PROJECT_PATH, safe='')}/hooks/{HOOK_ID}/events"


@pytest.fixture
def box() -> Iterator[tuple[Sandbox, RunningServer]]:
    world = build_world(
        5, now=NOW, stripe_events=0, github_deliveries=0, shopify_orders=0, listed={"gitlab": 37}
    )
    sandbox = Sandbox(world, stand_ins=["gitlab"])
    server = start_server(sandbox.app)
    yield sandbox, server
    server.stop()


def connector(
    url: str,
    monkeypatch: pytest.MonkeyPatch,
    token: str = TOKEN,
    scope: dict[str, Any] | None = None,
    **extra: Any,
) -> GitLabHookEvents:
    monkeypatch.setenv("T_GITLAB_TOKEN", token)
    entry = {
        "name": "gitlab",
        "kind": "gitlab",
        "base_url": f"{url}/gitlab",
        "signing_secret_env": "T_GITLAB_TOKEN",
        "api_key_env": "T_GITLAB_TOKEN",
        **(scope or {"project": PROJECT_PATH, "hook_id": HOOK_ID}),
        **extra,
    }
    built = build_connector(parse_settings({"sources": [entry]}, "<test>").sources[0])
    assert isinstance(built, GitLabHookEvents)
    return built


def scan(c: GitLabHookEvents) -> list[Record]:
    try:
        pages = list(c.pages(None, ScanOptions(now=NOW, initial_lookback=timedelta(days=2))))
    finally:
        c.close()
    return [r for p in pages for r in p.records]


def test_python_gitlab_and_the_connector_read_the_same_deliveries_in_the_same_order(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, server = box
    gl = gitlab.Gitlab(f"{server.url}/gitlab", private_token=TOKEN)
    listed = gl.http_list(EVENTS, iterator=True, per_page=8)
    assert isinstance(listed, gitlab.GitlabList)
    sdk = [(log["id"], log["request_headers"]["Idempotency-Key"]) for log in listed]
    assert listed.total == 37 and listed.total_pages == 5

    ours = scan(connector(server.url, monkeypatch, page_size=8))
    assert [(int(r.attempts[0].attempt_id), r.event_id) for r in ours] == sdk
    times = [r.occurred_at for r in ours if r.occurred_at is not None]
    assert len(times) == 37 and times == sorted(
        times, reverse=True
    )  # newest first: created_at DESC


def test_the_event_ids_are_the_ones_the_receiver_stores(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, server = box
    sent = {s.event_id: s for s in sandbox.world.listed["gitlab"]}
    for record in scan(connector(server.url, monkeypatch)):
        delivered = sent[str(record.event_id)]
        assert delivered.headers["idempotency-key"] == record.event_id
        assert record.event_type == delivered.headers["x-gitlab-event"]
        # the log's request_data is the body GitLab sent: a backfill stores that body
        event, body = as_delivery(record)
        assert event.event_id == record.event_id
        assert json.loads(body) == json.loads(delivered.body)


def test_per_page_beyond_20_is_refused_and_the_connector_asks_for_20(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, server = box
    gl = gitlab.Gitlab(f"{server.url}/gitlab", private_token=TOKEN)
    with pytest.raises(gitlab.GitlabHttpError) as refused:
        gl.http_list(EVENTS, per_page=100)
    assert refused.value.response_code == 400
    assert "per_page does not have a valid value" in str(refused.value.error_message)

    route = f"/gitlab/api/v4/projects/{PROJECT_PATH}/hooks/{HOOK_ID}/events"
    before = sandbox.stats.by_route[route]
    c = connector(server.url, monkeypatch, page_size=100)
    assert c.page_size == 20
    assert len(scan(c)) == 37
    assert sandbox.stats.by_route[route] - before == 2  # 20 + 17, the end told by X-Next-Page


def test_offset_pages_as_gitlab_answers_them(box: tuple[Sandbox, RunningServer]) -> None:
    _, server = box
    url = f"{server.url}/gitlab/api/v4/projects/{PROJECT_ID}/hooks/{HOOK_ID}/events"
    auth = {"PRIVATE-TOKEN": TOKEN}
    last = httpx.get(url, params={"page": 2, "per_page": 20}, headers=auth)
    assert len(last.json()) == 17 and last.headers["x-next-page"] == ""
    assert 'rel="prev"' in last.headers["link"] and 'rel="next"' not in last.headers["link"]
    past = httpx.get(url, params={"page": 9}, headers=auth)  # no cursor to forge: just empty
    assert past.status_code == 200 and past.json() == [] and past.headers["x-next-page"] == ""
    failed = httpx.get(url, params={"status": "server_failure"}, headers=auth).json()
    assert all(log["response_status"] in ("internal error", "502") for log in failed)
    bad = httpx.get(url, params={"status": "teapot"}, headers=auth)
    assert bad.status_code == 400 and bad.json() == {"error": "status does not have a valid value"}
    bearer = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200
    missing = httpx.get(url.replace(str(HOOK_ID), "1"), headers=auth)
    assert missing.status_code == 404 and missing.json() == {"message": "404 Not found"}


def test_a_group_hook_is_read_the_same_way(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, server = box
    project = [r.event_id for r in scan(connector(server.url, monkeypatch))]
    group = scan(
        connector(server.url, monkeypatch, scope={"group": GROUP_ID, "hook_id": GROUP_HOOK_ID})
    )
    assert [r.event_id for r in group] == project


def test_a_token_without_the_role_is_named_with_the_permission(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, server = box
    c = connector(server.url, monkeypatch, token=GUEST_TOKEN)
    try:
        with pytest.raises(AuthError, match="Maintainer role"):
            c.check_access()
    finally:
        c.close()


def test_an_event_is_found_by_its_key_and_resent_by_its_log_id(
    box: tuple[Sandbox, RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox, server = box
    stand_in = sandbox.stand_ins["gitlab"]
    assert isinstance(stand_in, GitLabStandIn)
    event = sandbox.world.listed["gitlab"][3]
    c = connector(server.url, monkeypatch)
    try:
        assert c.fetch_event(event.event_id).event_id == event.event_id
        c.redeliver(event.event_id)
        with pytest.raises(NotFoundError):
            c.fetch_event("00000000-0000-4000-8000-000000000000")
    finally:
        c.close()
    assert stand_in.resent == [event.item["id"]]
    url = f"{server.url}/gitlab/api/v4{EVENTS}/{event.item['id']}/resend"
    answers = [httpx.post(url, headers={"PRIVATE-TOKEN": TOKEN}) for _ in range(5)]
    assert [a.status_code for a in answers] == [201] * 4 + [429]  # 5 a minute per hook and user
    assert answers[0].json() == {"response_status": 200}


def test_a_lost_delivery_is_backfilled_from_the_log_and_the_real_one_is_a_duplicate(
    box: tuple[Sandbox, RunningServer],
    db_url: str,
    engine: Engine,
    serve: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sandbox, server = box
    for name, value in environment("gitlab").items():
        monkeypatch.setenv(name, value)
    entry = source_entry("gitlab", server.url, initial_lookback_hours=48)
    config = parse_settings({"database": {"url": db_url}, "sources": [entry]}, "<test>")
    history = sandbox.world.listed["gitlab"]
    lost = history[5]
    url = f"{serve(create_app(config, engine)).url}/webhooks/gitlab"
    deliver(config, "gitlab", url, [e for e in history if e is not lost])
    Reconciler(engine, config).run("gitlab")
    with engine.connect() as conn:
        found = conn.execute(select(DISCREPANCIES.c.kind, DISCREPANCIES.c.event_id)).all()
    assert [(str(k), e) for k, e in found] == [("missing", lost.event_id)]

    source = config.sources[0]
    c = build_connector(source)
    try:
        result = backfill(engine, source, c, lost.event_id, actor="ops", reason="lost")
    finally:
        c.close()
    assert (result.outcome, result.missing_resolved) == ("accepted", 1)
    secret = source.signing_secrets()[0]
    signed = provider("gitlab").sign
    assert signed is not None
    headers = {
        **lost.headers,
        **signed(options_of(source), lost.headers, lost.body, secret, 0, url),
    }
    answer = httpx.post(url, content=lost.body, headers=headers).json()
    assert answer["status"] == "duplicate"  # the logged body and key are the delivered ones


def test_a_source_names_one_hook() -> None:
    assert rule({"kind": "gitlab", "project": 1, "group": 2, "hook_id": 3})
    assert rule({"kind": "gitlab", "project": "a/b"})
    assert rule({"kind": "gitlab", "hook_id": 3})
    assert rule({"kind": "gitlab", "api_key_env": "T"})
    assert rule({"kind": "gitlab"}) is None  # receive-only
    assert rule({"kind": "gitlab", "project": "a/b", "hook_id": 3, "api_key_env": "T"}) is None
    assert events_path("a/b.c", None, 7) == "/api/v4/projects/a%2Fb.c/hooks/7/events"
    assert events_path(None, 12, 7) == "/api/v4/groups/12/hooks/7/events"


def test_a_log_from_before_17_4_is_named_by_its_event_uuid() -> None:
    """GitLab 17.3 lists hook events but sends no Idempotency-Key: the receiver then names the event
    by X-Gitlab-Event-UUID, and so does the record."""
    item = {
        "id": 9,
        "request_headers": {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Event-UUID": "u-1"},
        "request_data": {"object_kind": "push"},
        "response_status": "internal error",
        "created_at": "2026-05-26T03:03:17.000Z",
    }
    c = GitLabHookEvents("gl", ProviderClient("gl", "https://x"), path="/e", permission="p")
    try:
        record = c.checked(item, "https://x/e", 0)
    finally:
        c.close()
    assert (record.event_id, record.event_type, record.object_type) == ("u-1", "Push Hook", "push")
    [attempt] = record.attempts
    assert (attempt.attempt_id, attempt.ok, attempt.status_code) == ("9", False, None)


JSON = JSON_VALUES
HEADERS = st.dictionaries(
    st.sampled_from(["Idempotency-Key", "X-Gitlab-Event-UUID", "X-Gitlab-Event", "x"]), JSON
)
LOG = st.fixed_dictionaries(
    {},
    optional={
        "id": JSON,
        "request_headers": HEADERS | JSON,
        "request_data": st.fixed_dictionaries(
            {}, optional={"object_kind": JSON, "object_attributes": JSON}
        )
        | JSON,
        "created_at": JSON | st.datetimes().map(lambda d: d.isoformat()),
        "response_status": JSON,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item=LOG | JSON, body=st.none() | JSON)
def test_a_hostile_log_item_is_a_record_or_a_one_line_error_naming_the_url(
    item: Any, body: Any
) -> None:
    url = "https://gitlab.example.com/api/v4/projects/1/hooks/2/events?per_page=20"
    client = ProviderClient("gl", "https://gitlab.example.com")
    c = GitLabHookEvents("gl", client, path=events_path(1, None, 2), permission="read_api")
    try:
        for step in (
            lambda: c.checked(item, url, 0),
            lambda: c.items({"items": body, "next_page": body}, url),
            lambda: c.onward({"items": [], "next_page": body}, url, c.first(NOW, 20), []),
        ):
            try:
                result = step()
            except MalformedResponseError as exc:
                assert "/api/v4/projects/1/hooks/2/events" in str(exc) and "\n" not in str(exc)
                continue
            assert result is None or isinstance(result, Record | list) or result.url
    finally:
        c.close()
