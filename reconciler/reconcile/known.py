"""The objects the inbox knows of a source: what a provider with no list API reads back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from sqlalchemy import Engine, select

from reconciler.storage.models import INBOX_EVENTS

PAGE = 500


def known_object_ids(engine: Engine, source: str, since: datetime) -> Iterator[str]:
    """The distinct object ids of the source's events received since ``since``, in id order, read
    a page at a time (keyset on the id, a short connection each): memory stays flat."""
    e = INBOX_EVENTS
    last = ""
    while True:
        with engine.connect() as conn:
            ids = (
                conn.execute(
                    select(e.c.object_id)
                    .where(
                        e.c.source == source,
                        e.c.received_at >= since,
                        e.c.object_id > last,
                    )
                    .group_by(e.c.object_id)
                    .order_by(e.c.object_id)
                    .limit(PAGE)
                )
                .scalars()
                .all()
            )
        if not ids:
            return
        yield from ids
        last = ids[-1]
