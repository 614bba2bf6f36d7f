"""Which objects a scan met recently on a newer record, per check.

A newest-first listing lists an object's older events on later pages (a sliced one in any order).
A page's older record of an object met already on a newer one is stale there: the judge does not
judge it again, and the look-up does not ask the provider about its older snapshot.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from datetime import datetime

from connectors.base import Record

# Objects a scan remembers, per memory (about 200 bytes each; a run keeps two, the look-up's and
# the judge's): an object's events lie close together in time, so the pages that list its older
# ones come soon after. One forgotten costs a business read and at most one request again, never a
# verdict: the look-up, which remembers every object the judge does and more, forgets it first.
REMEMBERED = 20_000


class NewestMet:
    """When each recently met object's newest record was from, per check (the oldest forgotten
    first, past ``remembered``)."""

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self.remembered = remembered
        self._at: OrderedDict[tuple[int, str, str], datetime] = OrderedDict()

    def without_older(self, check: int, latest: Mapping[str, Record]) -> dict[str, Record]:
        """``latest`` (object id -> record) without the objects met on a newer record."""
        out = {}
        for object_id, record in latest.items():
            at = self._at.get((check, record.object_type or "", object_id))
            if at is None or record.occurred_at is None or record.occurred_at >= at:
                out[object_id] = record
        return out

    def remember(self, check: int, records: Iterable[Record]) -> None:
        """These records met; an older record than the one remembered changes nothing, not even
        how recently its object was met (so the look-up's memory never outlasts the judge's for
        an object it judged: see REMEMBERED)."""
        for record in records:
            if record.occurred_at is None or record.object_id is None:
                continue
            key = (check, record.object_type or "", record.object_id)
            at = self._at.get(key)
            if at is None or record.occurred_at > at:
                self._at.pop(key, None)
                self._at[key] = record.occurred_at
        while len(self._at) > self.remembered:
            self._at.popitem(last=False)
