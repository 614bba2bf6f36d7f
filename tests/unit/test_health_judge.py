"""The health strip's judgement (pure): a failed last run is red whatever the last success's age;
checks that cannot apply are not shown as warnings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.ops.health import HealthFacts, LastRun, Level, first_line, judge

NOW = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def _facts(**overrides: object) -> HealthFacts:
    base: dict[str, object] = {
        "now": NOW,
        "dead": 0,
        "stuck": 0,
        "oldest_unprocessed_age": None,
        "last_success": {},
        "last_run": {},
        "heartbeat": None,
        "last_delivery": NOW - timedelta(minutes=1),
    }
    return HealthFacts(**{**base, **overrides})  # type: ignore[arg-type]


def _by_label(facts: HealthFacts) -> dict[str, tuple[str, Level, str]]:
    return {s.label: (s.value, s.level, s.detail) for s in judge(facts, 3600, 60)}


def test_a_failed_last_run_is_red_though_a_success_is_recent() -> None:
    facts = _facts(
        last_success={"github": NOW - timedelta(minutes=29)},
        last_run={"github": LastRun("failed", NOW - timedelta(minutes=2), "401 from the API")},
        heartbeat=NOW,
    )
    assert _by_label(facts)["Reconciled: github"] == (
        "failed 2 min ago",
        Level.BAD,
        "401 from the API",
    )


def test_a_succeeded_last_run_keeps_the_age_rule() -> None:
    facts = _facts(
        last_success={"github": NOW - timedelta(minutes=29)},
        last_run={"github": LastRun("succeeded", NOW - timedelta(minutes=29), None)},
        heartbeat=NOW,
    )
    assert _by_label(facts)["Reconciled: github"][1] is Level.OK


def test_nothing_to_reconcile_shows_neither_runs_nor_a_scheduler_warning() -> None:
    labels = _by_label(_facts())
    assert not any(label.startswith("Reconciled") for label in labels)
    assert "Scheduler" not in labels


def test_a_reconciled_source_without_a_scheduler_still_warns() -> None:
    labels = _by_label(_facts(last_success={"stripe": None}))
    assert labels["Scheduler"][1] is Level.WARN
    assert labels["Reconciled: stripe"][1] is Level.WARN


def test_first_line_skips_blank_lines_and_cuts_long_ones() -> None:
    assert first_line("\n\n  boom: 401  \nTraceback") == "boom: 401"
    assert first_line(None) == ""
    cut = first_line("x" * 500, limit=20)
    assert len(cut) == 20 and cut.endswith("…")
