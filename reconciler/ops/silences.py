"""Silencing a health-strip warning an operator cannot act on (no scheduler in a demo, a source
that is quiet by design): for a while, with a reason, by a named operator, audited. Only warnings
(amber) can be silenced: a red signal always asks for someone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, insert, select, update

from reconciler.audit import record_audit
from reconciler.errors import ActionRefusedError
from reconciler.storage.models import HEALTH_SILENCES
from reconciler.storage.types import as_utc

# how long a silence may last: long enough for a demo or a holiday, short enough to be seen again
DURATIONS = {"1 hour": timedelta(hours=1), "1 day": timedelta(days=1), "7 days": timedelta(days=7)}
MAX_SILENCE = timedelta(days=30)


@dataclass(frozen=True)
class Silenced:
    by: str
    until: datetime
    reason: str

    def describe(self) -> str:
        return f"silenced by {self.by} until {self.until:%Y-%m-%d %H:%M} UTC: {self.reason}"


def active(conn: Connection, now: datetime) -> dict[str, Silenced]:
    """Each silenced signal's label → the silence that lasts longest (expired ones are history)."""
    s = HEALTH_SILENCES
    rows = conn.execute(
        select(s.c.signal, s.c.silenced_by, s.c.until, s.c.reason)
        .where(s.c.until > now)
        .order_by(s.c.signal, s.c.until)
    )
    out: dict[str, Silenced] = {}
    for row in rows:  # ordered by until: the last one per signal wins
        until = as_utc(row.until)
        if until is not None:
            out[str(row.signal)] = Silenced(str(row.silenced_by), until, str(row.reason))
    return out


def silence(
    engine: Engine, signal: str, length: timedelta, now: datetime, *, actor: str, reason: str
) -> str:
    """Silence ``signal`` for ``length`` (at most ``MAX_SILENCE``); one transaction with its
    audit entry."""
    why = (reason or "").strip()
    if not why:
        raise ActionRefusedError("a reason is required")
    if not signal.strip() or len(signal) > 128:
        raise ActionRefusedError(f"not a health signal: {signal[:40]!r}")
    if not timedelta(0) < length <= MAX_SILENCE:
        raise ActionRefusedError("a silence lasts between a minute and 30 days")
    until = now + length
    with engine.begin() as conn:
        conn.execute(
            insert(HEALTH_SILENCES).values(
                signal=signal, silenced_by=actor, reason=why[:500], created_at=now, until=until
            )
        )
        record_audit(
            conn,
            actor=actor,
            action="health.silenced",
            target=signal,
            reason=why,
            detail={"until": until.isoformat()},
        )
    return f"'{signal}' silenced until {until:%Y-%m-%d %H:%M} UTC"


def unsilence(engine: Engine, signal: str, now: datetime, *, actor: str, reason: str) -> str:
    """End every silence of ``signal`` now; one transaction with its audit entry."""
    why = (reason or "").strip()
    if not why:
        raise ActionRefusedError("a reason is required")
    with engine.begin() as conn:
        ended = conn.execute(
            update(HEALTH_SILENCES)
            .where(HEALTH_SILENCES.c.signal == signal, HEALTH_SILENCES.c.until > now)
            .values(until=now)
        ).rowcount
        if not ended:
            raise ActionRefusedError(f"'{signal}' is not silenced")
        record_audit(conn, actor=actor, action="health.unsilenced", target=signal, reason=why)
    return f"'{signal}' shows again"
