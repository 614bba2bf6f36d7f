"""A check's business table, as the reconciler reads it (SQLite and PostgreSQL): the columns are all
it reflects, and a page's rows come back by key whatever the key column's type and however many
keys the page holds (PostgreSQL takes them as one array parameter)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, event, text

from reconciler.config import SourceSettings, parse_settings
from reconciler.errors import ConfigError
from reconciler.reconcile.business import BoundCheck, bind_checks, duplicated, rows_by_key

TABLES = ("hl_t_biz_text", "hl_t_biz_int")


@pytest.fixture
def business(engine: Engine) -> Iterator[Engine]:
    with engine.begin() as conn:
        conn.execute(text("DROP VIEW IF EXISTS hl_t_biz_view"))
        for table in TABLES:
            conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
        conn.execute(
            text("CREATE TABLE hl_t_biz_text (ref VARCHAR(40), status VARCHAR(20), note TEXT)")
        )
        conn.execute(text("CREATE TABLE hl_t_biz_int (ref BIGINT, status VARCHAR(20))"))
        conn.execute(text("CREATE VIEW hl_t_biz_view AS SELECT ref, status FROM hl_t_biz_text"))
        rows = [{"ref": f"in_{i}", "status": "paid"} for i in range(300)]
        conn.execute(text("INSERT INTO hl_t_biz_text (ref, status) VALUES (:ref, :status)"), rows)
        conn.execute(text("INSERT INTO hl_t_biz_text (ref, status) VALUES ('in_7', 'open')"))
        conn.execute(text("INSERT INTO hl_t_biz_int VALUES (123, 'paid'), (456, 'open')"))
    yield engine
    with engine.begin() as conn:
        conn.execute(text("DROP VIEW IF EXISTS hl_t_biz_view"))
        for table in TABLES:
            conn.execute(text(f"DROP TABLE IF EXISTS {table}"))


def _source(table: str, **check: object) -> SourceSettings:
    os.environ.setdefault("HL_T_BIZ_KEY", "sk_test_x")
    settings = parse_settings(
        {
            "sources": [
                {
                    "name": "stripe",
                    "kind": "stripe",
                    "api_key_env": "HL_T_BIZ_KEY",
                    "checks": [
                        {
                            "object_type": "invoice",
                            "table": table,
                            "key": "ref",
                            "fields": {"status": "status"},
                            **check,
                        }
                    ],
                }
            ]
        },
        "<test>",
    )
    return settings.sources[0]


def _bound(engine: Engine, table: str, **check: object) -> BoundCheck:
    return bind_checks(engine, _source(table, **check))[0]


def test_a_pages_rows_come_back_by_key_however_many_keys_it_holds(business: Engine) -> None:
    check = _bound(business, "hl_t_biz_text")
    with business.connect() as conn:
        for size in (1, 100, 250):
            keys = [f"in_{i}" for i in range(size)] + ["in_absent"]
            found = rows_by_key(conn, check, keys)
            assert set(found) == {f"in_{i}" for i in range(size)}
        two = rows_by_key(conn, check, ["in_7"])["in_7"]
        assert sorted(r["status"] for r in two) == ["open", "paid"]  # two rows: a duplicate
        assert rows_by_key(conn, check, []) == {}


def test_an_integer_key_column_is_read_by_the_object_ids_text(business: Engine) -> None:
    check = _bound(business, "hl_t_biz_int")
    with business.connect() as conn:
        found = rows_by_key(conn, check, ["123", "456", "789"])
    assert {k: [r["status"] for r in v] for k, v in found.items()} == {
        "123": ["paid"],
        "456": ["open"],
    }


def test_only_the_columns_are_reflected_and_a_view_is_a_table_here(business: Engine) -> None:
    """A check reads its columns and nothing else of the table: one catalogue read a check (on
    PostgreSQL the columns with their domains and enums; a full reflection asked for indexes,
    constraints and comments too, a query each)."""
    statements: list[str] = []

    def count(*args: object) -> None:
        statements.append(str(args[2]))

    business.connect().close()  # (the connection's own set-up queries are not the reflection's)
    event.listen(business, "before_cursor_execute", count)
    try:
        check = _bound(business, "hl_t_biz_view", unique_by="ref")
    finally:
        event.remove(business, "before_cursor_execute", count)
    assert len(statements) <= 3, statements
    assert [c.name for c in check.table.c] == ["ref", "status"]
    assert not check.table.indexes and not check.table.foreign_keys
    with business.connect() as conn:
        assert duplicated(conn, check, ["in_7", "in_8"]) == {"in_7": 2}
        assert [r["status"] for r in rows_by_key(conn, check, ["in_8"])["in_8"]] == ["paid"]


def test_a_missing_table_or_column_names_the_check(business: Engine) -> None:
    with pytest.raises(ConfigError, match=r"check 1 \(table hl_t_nope\).*no table 'hl_t_nope'"):
        _bound(business, "hl_t_nope")
    with pytest.raises(ConfigError, match=r"table 'hl_t_biz_int' has no column 'amount'"):
        _bound(business, "hl_t_biz_int", fields={"amount": "amount_paid"})
