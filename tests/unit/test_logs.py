"""Log lines: text or one JSON object each, with the structured fields; the same failure repeated
is logged once, then with a count (no I/O: a record in, a line or nothing out)."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.logs import RepeatFilter, configure_logging


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(
    msg: str = "storing a delivery failed", level: int = logging.ERROR, exc: bool = True
) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ConnectionError("database unreachable")
        except ConnectionError:
            exc_info = sys.exc_info()
    return logging.LogRecord("reconciler.inbox", level, __file__, 1, msg, None, exc_info)


def test_a_repeated_failure_is_held_back_counted_and_logged_again_without_its_traceback() -> None:
    clock = Clock()
    repeats = RepeatFilter(every=60, clock=clock)
    first = record()
    assert repeats.filter(first) and first.exc_info is not None  # the first, with its traceback
    held = 0
    for _ in range(3374):  # a database outage: every request fails alike
        clock.now += 0.005
        held += not repeats.filter(record())
    assert held == 3374
    clock.now = 61.0
    summary = record()
    assert repeats.filter(summary)
    assert summary.getMessage() == (
        "storing a delivery failed (and 3374 more like it in the last 60 s)"
    )
    assert summary.exc_info is None and summary.__dict__["repeated"] == 3374
    # another failure, another key: not held back by the first
    assert repeats.filter(record("a page could not be stored"))
    # below WARNING everything passes
    assert all(repeats.filter(record(level=logging.INFO, exc=False)) for _ in range(5))


def test_a_failure_that_comes_back_after_a_quiet_hour_keeps_its_traceback() -> None:
    clock = Clock()
    repeats = RepeatFilter(every=60, clock=clock)
    assert repeats.filter(record())
    clock.now = 3600.0
    again = record()
    assert repeats.filter(again) and again.exc_info is not None
    assert "more like it" not in again.getMessage()


def test_what_the_filter_remembers_is_bounded() -> None:
    repeats = RepeatFilter(every=60, clock=Clock(), keep=10)
    for i in range(100):
        repeats.filter(record(f"failure {i}"))
    assert len(repeats._seen) == 10


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_line_carries_the_structured_fields(fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    configure_logging("INFO", fmt)
    log = logging.getLogger("reconciler.test")
    log.info(
        "delivery stored\nforged: line",
        extra={"source": "stripe", "event_id": "evt_1", "correlation_id": "c-1"},
    )
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("a handler failed", extra={"source": "stripe", "run_id": "r-1"})
    lines = out.getvalue().splitlines()
    if fmt == "json":
        first, second = (json.loads(line) for line in lines)
        assert first["level"] == "INFO" and first["logger"] == "reconciler.test"
        assert first["message"] == "delivery stored\nforged: line"  # one line: JSON escapes it
        assert (first["source"], first["event_id"], first["correlation_id"]) == (
            "stripe",
            "evt_1",
            "c-1",
        )
        assert first["time"].endswith("Z") or "+00:00" in first["time"]
        assert second["run_id"] == "r-1" and "ValueError: boom" in second["exc_info"]
        assert len(lines) == 2
    else:
        assert lines[0].endswith(
            "delivery stored\\x0aforged: line source=stripe event_id=evt_1 correlation_id=c-1"
        )
        assert "Traceback" in out.getvalue()
    configure_logging("INFO")


def test_json_lines_drop_uvicorns_coloured_copy_of_the_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    configure_logging("INFO", "json")
    # as uvicorn logs "Started server process": the plain message and a copy with ANSI codes (a
    # logger of ours: other tests' uvicorn servers leave uvicorn's loggers not propagating)
    logging.getLogger("reconciler.test").info(
        "Started server process [%d]",
        42,
        extra={"color_message": "Started server process [\x1b[36m%d\x1b[0m]"},
    )
    [line] = out.getvalue().splitlines()
    document = json.loads(line)
    assert document["message"] == "Started server process [42]"
    assert "color_message" not in document and "\\u001b" not in line


def _pan(body: str) -> str:
    for check in "0123456789":
        digits = body + check
        total = sum(
            (d * 2 - 9 if d * 2 > 9 else d * 2) if i % 2 else d
            for i, d in enumerate(int(c) for c in reversed(digits))
        )
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


@given(
    pan=st.builds(
        lambda first, rest: _pan(first + rest),
        st.sampled_from("23456"),
        st.text("0123456789", min_size=14, max_size=14),
    ),
    field=st.sampled_from(["source", "event_id", "reason", "target", "correlation_id"]),
    sep=st.sampled_from(["", " ", "-", "."]),
    before=st.text(st.characters(blacklist_categories=("Nd", "Cs")), max_size=10),
)
def test_a_card_number_in_a_log_field_is_masked_in_text_and_json(
    pan: str, field: str, sep: str, before: str
) -> None:
    """Fields carry values strangers chose (a source name from the URL path, an event id): a card
    number in one is masked as in the message, in both formats."""
    from reconciler.logs import _FieldsFormatter, _json_formatter

    shown = sep.join(pan[i : i + 4] for i in range(0, len(pan), 4))
    rec = logging.LogRecord("reconciler.inbox", logging.INFO, __file__, 1, "rejected", None, None)
    setattr(rec, field, f"{before}{shown}")
    rec.status = 404  # a number stays a number
    text = _FieldsFormatter("%(message)s").format(rec)
    document = json.loads(_json_formatter().format(rec))
    for line in (text, json.dumps(document, ensure_ascii=False)):
        assert pan not in line.replace(sep, "") if sep else pan not in line
    assert "<masked>" in document[field] and document["status"] == 404
    assert text.startswith("rejected ") and "<masked>" in text
