"""[issues]: how failures grouped as issues resolve themselves."""

from __future__ import annotations

import re
from datetime import timedelta

from pydantic import field_validator

from reconciler.config.base import _Table

_DURATION = re.compile(r"^\s*(\d{1,6})\s*([smhd])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_DURATION = timedelta(days=365)


def parse_duration(text: str) -> timedelta:
    """``30m``, ``24h``, ``7d``: a number and a unit (s, m, h, d). ValueError otherwise."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"'{text}' is not a duration such as 30m, 24h or 7d")
    value = timedelta(seconds=int(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    if not timedelta(minutes=1) <= value <= MAX_DURATION:
        raise ValueError(f"'{text}' is outside 1m to 365d")
    return value


class IssuesSettings(_Table):
    # an open or acknowledged issue is resolved when nothing new failed in it for this long and
    # none of its items still fails (its dead events were replayed, its discrepancies closed)
    auto_resolve_after: str = "24h"

    @field_validator("auto_resolve_after")
    @classmethod
    def _valid_duration(cls, value: str) -> str:
        parse_duration(value)
        return value

    @property
    def auto_resolve_delta(self) -> timedelta:
        return parse_duration(self.auto_resolve_after)
