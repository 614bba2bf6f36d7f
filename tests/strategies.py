"""Hypothesis strategies the tests of several input paths share."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # a named function, not a lambda: hypothesis reads a lambda's source to check it recurses
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)


# any small JSON value (no NaN or infinity: JSON holds none): what a hostile provider page may hold
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    _containers,
    max_leaves=12,
)
