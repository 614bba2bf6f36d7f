"""``hookledger drill --target`` re-signs every kind whose scheme can be signed (issue 48), generated
from the registry: each kind's samples are received over loopback HTTP into one inbox, then the
drill delivers every stored body twice, signed afresh with the source's own scheme and secret, to a
staging receiver configured alike, which accepts every one and stores each event once."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Column, Engine, MetaData, String, Table, create_engine, select

from connectors.registry import kinds, provider
from reconciler.inbox.receiver import create_app
from reconciler.ops.drill import drill_target
from reconciler.sources import options_of
from reconciler.storage.migrate import upgrade
from reconciler.storage.models import INBOX_EVENTS
from reconciler.storage.types import utcnow
from tests.conftest import make_settings
from tests.kinds import EXTRA_KEYS, secret_for

SIGNED = [k for k in kinds() if provider(k).samples is not None and provider(k).resignable]


# kinds whose event id is completed on arrival (Dropbox's notifications carry no id): what stays
PER_ARRIVAL = {"dropbox": lambda event_id: event_id.rsplit(":", 1)[0]}


def _stored(engine: Engine, source: str) -> list[str]:
    with engine.connect() as conn:
        query = select(INBOX_EVENTS.c.event_id).where(INBOX_EVENTS.c.source == source)
        return sorted(conn.execute(query).scalars())


def _scratch(path: Path) -> str:
    url = f"sqlite:///{path}"
    engine = create_engine(url)
    Table("drilled", MetaData(), Column("object_id", String(80))).create(engine)
    engine.dispose()
    return url


@pytest.mark.parametrize("kind", SIGNED)
def test_every_signable_kind_is_drilled_against_a_staging_receiver(
    kind: str,
    db_url: str,
    engine: Engine,
    serve: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    own = provider(kind)
    assert own.samples is not None and own.resignable
    monkeypatch.setenv(
        "T_KIND_SECRET", secret_for(kind, own.scheme.algorithm if own.scheme else None)
    )
    monkeypatch.setenv("T_GOPAY_ID", "verify-token")
    source: dict[str, Any] = {
        "name": kind,
        "kind": kind,
        "signing_secret_env": "T_KIND_SECRET",
        "checks": [{"event_types": ["*"], "table": "drilled", "key": "object_id"}],
        **EXTRA_KEYS.get(kind, {}),
    }
    settings = make_settings(db_url, sources=[source])
    options = options_of(settings.sources[0], secrets=False)
    secret = settings.sources[0].signing_secrets()[0]
    production = serve(create_app(settings, engine))
    with httpx.Client(timeout=30) as client:
        for event_type in own.samples.types:
            sample = own.samples.sample(options, event_type, secret)
            url = f"{production.url}/webhooks/{kind}"
            signed, body = own.signed_afresh(
                options, sample.headers, sample.body, secret, time.time(), url
            )
            answer = client.post(url, content=body, headers=dict(sample.headers) | signed)
            assert answer.status_code < 300, (kind, event_type, answer.text)
    received = _stored(engine, kind)
    assert received

    staging_engine = create_engine(f"sqlite:///{tmp_path / 'staging-inbox.db'}")
    upgrade(staging_engine)
    staging = serve(
        create_app(make_settings(str(staging_engine.url), sources=[source]), staging_engine)
    )
    result = drill_target(
        engine,
        settings,
        settings.sources[0],
        target=staging.url,
        business_url=_scratch(tmp_path / "staging-business.db"),
        reference_url=_scratch(tmp_path / "reference.db"),
        since=utcnow() - timedelta(hours=1),
        wait_seconds=0,
    )
    assert result.events == len(received) and result.deliveries == 2 * len(received)
    drilled = _stored(staging_engine, kind)
    if kind in PER_ARRIVAL:  # each delivery its own event: both of each body's, and no other
        assert len(drilled) == 2 * len(received)
        assert {PER_ARRIVAL[kind](i) for i in drilled} == {PER_ARRIVAL[kind](i) for i in received}
    else:
        assert drilled == received  # each accepted, each stored once
    staging_engine.dispose()
