"""A handler module loaded through ``[worker] handlers`` by the CLI tests."""

from __future__ import annotations

from sqlalchemy import Connection

from reconciler.errors import PermanentError
from reconciler.inbox.handlers import Event, handler


@handler("stripe", "invoice.paid")
def paid(event: Event, conn: Connection) -> None:
    if event.payload["data"]["object"].get("status") == "broken":
        raise PermanentError("invoice payload is broken")
