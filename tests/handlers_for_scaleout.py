"""A handler that records each application of an event: the scale-out test counts them (a row per
application, no unique key, so an event applied twice shows twice)."""

from __future__ import annotations

from sqlalchemy import Connection, text

from reconciler.inbox.handlers import Event, handler


@handler("stripe")
def record(event: Event, conn: Connection) -> None:
    conn.execute(
        text("INSERT INTO scaleout_effects (event_id) VALUES (:event_id)"),
        {"event_id": event.event_id},
    )
