"""How far ``serve`` raises its open-file limit (pure: the limits are arguments)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reconciler.process import open_files_to_ask

INFINITY = -1  # resource.RLIM_INFINITY on Linux


def test_systemds_default_soft_limit_is_raised_to_fit_the_connections() -> None:
    assert open_files_to_ask(1_024, 524_288, 10_256) == 10_256
    assert open_files_to_ask(1_024, INFINITY, 10_256) == 10_256


def test_never_past_the_hard_limit_and_never_lowered() -> None:
    assert open_files_to_ask(1_024, 4_096, 10_256) == 4_096
    assert open_files_to_ask(65_536, 65_536, 10_256) is None
    assert open_files_to_ask(4_096, 4_096, 10_256) is None


@given(
    soft=st.integers(0, 10**6),
    hard=st.one_of(st.just(INFINITY), st.integers(0, 10**6)),
    wanted=st.integers(16, 10**6),
)
def test_any_limits_give_a_soft_limit_within_the_hard_one_or_none(
    soft: int, hard: int, wanted: int
) -> None:
    hard = hard if hard == INFINITY else max(hard, soft)
    asked = open_files_to_ask(soft, hard, wanted)
    if asked is not None:
        assert soft < asked <= wanted
        assert hard == INFINITY or asked <= hard
