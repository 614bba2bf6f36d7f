"""Two business states compared table by table, row by row (the redelivery drill's verdict).

The tables are those of the source's ``[[sources.checks]]``; rows are grouped by the check's key
(``unique_by`` when it names another column) and compared whole, except a surrogate primary key (a
single integer column that is not the key: its values depend on insertion order). Each difference is
``missing`` (the reference has rows for a key the drilled state lacks), ``extra`` (the reverse),
``duplicate`` (more rows for a key than the reference) or ``diverged`` (a column's values differ),
with the table, key, field and both values. Keys are read in sorted batches: memory holds one batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Connection, Integer, MetaData, Table, select

BATCH = 500


@dataclass(frozen=True)
class Difference:
    kind: str  # missing | extra | duplicate | diverged
    table: str
    key: str
    field: str
    expected: Any  # the reference's value (or row count)
    actual: Any  # the drilled state's

    def to_json(self) -> dict[str, Any]:
        return {k: _plain(v) for k, v in asdict(self).items()}


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


@dataclass(frozen=True)
class TableSpec:
    name: str  # as the checks name it (schema.table or table)
    key: str


def surrogate_columns(table: Table, key: str) -> set[str]:
    pk = list(table.primary_key.columns)
    if len(pk) == 1 and pk[0].name != key and isinstance(pk[0].type, Integer):
        return {pk[0].name}
    return set()


def _row_key(row: dict[str, Any], columns: Sequence[str]) -> str:
    return json.dumps([_plain(row.get(c)) for c in columns])


def compare_key(
    table: str,
    key: str,
    expected: list[dict[str, Any]],
    actual: list[dict[str, Any]],
    ignore: set[str],
) -> list[Difference]:
    """The differences of one key's rows (pure)."""
    if expected and not actual:
        return [Difference("missing", table, key, "", len(expected), 0)]
    if actual and not expected:
        return [Difference("extra", table, key, "", 0, len(actual))]
    if len(actual) > len(expected):
        return [Difference("duplicate", table, key, "", len(expected), len(actual))]
    if len(actual) < len(expected):
        return [Difference("missing", table, key, "(rows)", len(expected), len(actual))]
    columns = sorted({c for r in [*expected, *actual] for c in r} - ignore)
    out = []
    for e, a in zip(
        sorted(expected, key=lambda r: _row_key(r, columns)),
        sorted(actual, key=lambda r: _row_key(r, columns)),
        strict=True,
    ):
        for column in columns:
            if _plain(e.get(column)) != _plain(a.get(column)):
                out.append(Difference("diverged", table, key, column, e.get(column), a.get(column)))
    return out


def _reflect(conn: Connection, name: str) -> Table:
    schema, _, table = name.rpartition(".")
    return Table(table, MetaData(), autoload_with=conn, schema=schema or None)


def _keys(conn: Connection, table: Table, key: str, after: str | None) -> list[str]:
    column = table.c[key]
    stmt = select(column).distinct().order_by(column).limit(BATCH)
    if after is not None:
        stmt = stmt.where(column > after)
    return [str(k) for (k,) in conn.execute(stmt) if k is not None]


def _all_keys(a: Connection, ta: Table, b: Connection, tb: Table, key: str) -> Iterator[list[str]]:
    """Every key either table holds, in sorted batches (a merge of two ordered scans)."""
    after: str | None = None
    while True:
        batch = sorted(set(_keys(a, ta, key, after)) | set(_keys(b, tb, key, after)))[:BATCH]
        if not batch:
            return
        yield batch
        after = batch[-1]


def _rows(
    conn: Connection, table: Table, key: str, keys: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in conn.execute(select(table).where(table.c[key].in_(list(keys)))):
        mapping = dict(row._mapping)
        out.setdefault(str(mapping[key]), []).append(mapping)
    return out


def compare_states(
    reference: Connection,
    drilled: Connection,
    tables: Sequence[TableSpec],
    keys: Iterable[str] | None = None,
) -> list[Difference]:
    """Every difference between the two databases' tables; ``keys``: only those keys (a full
    business database compared only where the drill's events went), else every key of both."""
    wanted = sorted(set(keys)) if keys is not None else None
    out: list[Difference] = []
    for spec in tables:
        ref_table, drill_table = _reflect(reference, spec.name), _reflect(drilled, spec.name)
        ignore = surrogate_columns(ref_table, spec.key)
        batches: Iterable[list[str]] = (
            (wanted[i : i + BATCH] for i in range(0, len(wanted), BATCH))
            if wanted is not None
            else _all_keys(reference, ref_table, drilled, drill_table, spec.key)
        )
        for batch in batches:
            expected = _rows(reference, ref_table, spec.key, batch)
            actual = _rows(drilled, drill_table, spec.key, batch)
            for k in batch:
                out += compare_key(spec.name, k, expected.get(k, []), actual.get(k, []), ignore)
    return out


def compare_messages(
    expected: Mapping[tuple[str, str], bytes], actual: Mapping[tuple[str, str], bytes]
) -> list[Difference]:
    """The outgoing messages (target, key) -> payload that the reference and the drilled run wrote:
    a key only one of them has (a handler that makes a new key on every run sends twice), or one
    key with two payloads."""
    out = []
    for target, key in sorted(set(expected) | set(actual)):
        mine, theirs = expected.get((target, key)), actual.get((target, key))
        name = f"{target}:{key}"
        if theirs is None:
            out.append(Difference("missing", "outbox", name, "", 1, 0))
        elif mine is None:
            out.append(Difference("extra", "outbox", name, "", 0, 1))
        elif mine != theirs:
            out.append(
                Difference("diverged", "outbox", name, "payload", _text(mine), _text(theirs))
            )
    return out


def _text(payload: bytes) -> str:
    return payload.decode("utf-8", errors="replace")[:500]
