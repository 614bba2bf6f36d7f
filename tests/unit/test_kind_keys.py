"""Keys per kind (issue 47): a source's own keys are validated by its kind's provider alone, a key
no kind of that source takes is refused naming the kind, defaults never leak between kinds, and a
provider's documented tolerance is a source's default. ``[[sources]]`` stays one flat table."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors import registry
from connectors.errors import ConfigError
from connectors.options import ProviderKeys
from connectors.provider import Provider
from connectors.webhooks import ParsedEvent
from reconciler.config.settings import parse_settings
from reconciler.sources import options_of


class NewKeys(ProviderKeys):
    api_version: str = "2026-01"


NEW = Provider(
    "newcomer",
    verify=lambda options, request, secrets: ParsedEvent(event_id="x"),
    keys=NewKeys,
    tolerance=5,
)


def _sources(*tables: dict[str, Any]) -> Any:
    return parse_settings({"sources": list(tables)}, "c.toml").sources


def test_a_kinds_default_does_not_leak_into_another_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.LOADED, "newcomer", NEW)
    new, shop = _sources(
        {"name": "n", "kind": "newcomer"},
        {"name": "s", "kind": "shopify", "base_url": "https://demo.myshopify.com"},
    )
    assert options_of(new, secrets=False).keys == NewKeys(api_version="2026-01")
    assert options_of(shop, secrets=False).keys.api_version == "2025-01"  # type: ignore[attr-defined]


def test_a_providers_tolerance_is_the_sources_default_unless_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(registry.LOADED, "newcomer", NEW)
    default, chosen, paddle = _sources(
        {"name": "a", "kind": "newcomer"},
        {"name": "b", "kind": "newcomer", "tolerance_seconds": 30},
        {"name": "p", "kind": "paddle"},
    )
    assert options_of(default, secrets=False).tolerance_seconds == 5
    assert options_of(chosen, secrets=False).tolerance_seconds == 30
    assert options_of(paddle, secrets=False).tolerance_seconds == 5  # Paddle's documented window
    (stripe,) = _sources({"name": "s", "kind": "stripe"})
    assert options_of(stripe, secrets=False).tolerance_seconds == 300


@pytest.mark.parametrize(
    "table, said",
    [
        ({"kind": "github", "bogus": 1}, "kind 'github' takes no key 'bogus'"),
        ({"kind": "github", "id_header": "X"}, "key 'id_header' applies only to kind 'generic'"),
        ({"kind": "stripe", "verify_token_env": "X"}, "applies only to kind 'meta'"),
        ({"kind": "shopify", "api_version": 3}, "key 'api_version'"),
    ],
)
def test_a_key_the_kind_does_not_take_is_refused_naming_it(
    table: dict[str, Any], said: str
) -> None:
    with pytest.raises(ConfigError, match=said) as refused:
        _sources({"name": "x", **table})
    assert str(refused.value).startswith("c.toml: table [sources][0] (name 'x')")


def _every_key() -> list[str]:
    return sorted({key for p in registry.every_provider() for key in p.keys.model_fields})


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5000),
    st.text(max_size=20),
    st.lists(st.text(max_size=8), max_size=3),
)


@settings(max_examples=300, deadline=None, database=None)
@given(
    kind=st.sampled_from(registry.kinds()),
    keys=st.dictionaries(st.sampled_from(_every_key()), _values, max_size=4),
)
def test_any_source_table_is_read_or_refused_in_one_line(kind: str, keys: dict[str, Any]) -> None:
    table = {"name": "x", "kind": kind, **{k: v for k, v in keys.items() if v is not None}}
    try:
        (source,) = _sources(table)
    except ConfigError as exc:
        assert str(exc).startswith("c.toml: table [sources][0] (name 'x')"), str(exc)
        return
    own = registry.provider(kind).keys
    assert isinstance(source.keys, own)
    assert set(source.model_extra or {}) <= set(own.model_fields)
