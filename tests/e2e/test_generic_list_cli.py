"""The run issue 48 found, as an operator meets it: Paddle's events read by a ``generic`` source
configured with the wrong ``cursor_style`` (a Link header, where Paddle puts its next page's URL in
the body) read one page of three and reported ``succeeded``. Now ``hookledger reconcile`` fails it,
exit 2, one line naming ``cursor_style``, the cursor not moved; configured as Paddle pages, the
same run reads all three pages. Over real loopback HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from reconciler.cli.main import main
from reconciler.storage.models import CURSORS, DISCREPANCIES, RECON_RUNS
from tests.conftest import RunningServer, start_server

IDS = [f"evt_{i:026d}" for i in range(6)]


def paddle_app() -> Starlette:
    async def events(request: Request) -> JSONResponse:
        size = min(int(request.query_params.get("per_page", "50")), 200)
        after = request.query_params.get("after")
        start = IDS.index(after) + 1 if after in IDS else 0
        page = IDS[start : start + size]
        more = start + size < len(IDS)
        base = str(request.base_url).rstrip("/")
        following = f"{base}/events?after={page[-1]}&per_page={size}" if more else None
        return JSONResponse(
            {
                "data": [
                    {
                        "event_id": i,
                        "event_type": "transaction.completed",
                        "occurred_at": "2026-12-06T10:00:00Z",
                    }
                    for i in page
                ],
                "meta": {"pagination": {"per_page": size, "next": following, "has_more": more}},
            }
        )

    return Starlette(routes=[Route("/events", events)])


@pytest.fixture
def paddle() -> Iterator[str]:
    server: RunningServer = start_server(paddle_app())
    yield server.url
    server.stop()


def _config(path: Path, db_url: str, api: str, paging: str) -> str:
    path.write_text(
        f"""
[database]
url = "{db_url}"

[[sources]]
name = "paddle"
kind = "generic"
signing_secret_env = "T_PADDLE_SECRET"
signature_header = "Paddle-Signature"
id_json_path = "event_id"
base_url = "{api}"
api_key_env = "T_PADDLE_KEY"
list_url = "/events"
limit_param = "per_page"
page_size = 2
id_path = "event_id"
type_path = "event_type"
time_path = "occurred_at"
{paging}
"""
    )
    return str(path)


def test_a_generic_list_configured_wrong_fails_naming_cursor_style_and_right_reads_it_all(
    db_url: str,
    engine: Engine,
    paddle: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("T_PADDLE_KEY", "pdl_apikey")
    wrong = _config(tmp_path / "wrong.toml", db_url, paddle, 'cursor_style = "link"')
    assert main(["reconcile", "--config", wrong, "--source", "paddle"]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert any("full page (2 items)" in line and "cursor_style 'link'" in line for line in said), (
        said
    )
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(CURSORS)).scalar_one() == 0
        statuses = conn.execute(select(RECON_RUNS.c.status)).scalars().all()
        assert statuses == ["failed"]
        assert conn.execute(select(func.count()).select_from(DISCREPANCIES)).scalar_one() == 0

    right = _config(
        tmp_path / "right.toml",
        db_url,
        paddle,
        'cursor_style = "next_url"\nnext_url_path = "meta.pagination.next"\n'
        'more_path = "meta.pagination.has_more"',
    )
    assert main(["reconcile", "--config", right, "--source", "paddle"]) == 0
    with engine.connect() as conn:
        missing = conn.execute(
            select(DISCREPANCIES.c.event_id).where(DISCREPANCIES.c.kind == "missing")
        ).scalars()
        assert sorted(missing) == IDS  # all three pages read: every event is missing from the inbox
