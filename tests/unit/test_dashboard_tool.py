"""Pure parts of the operator's dashboard: readable values, links and URL state, health judgement,
frames for charts and tables, the demo's day. No I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dashboard import urlstate
from reconciler.demo.day import SLOT, SteppedClock, arrival_times, day_ending
from reconciler.ops import display, frames
from reconciler.ops.dead_letters import DeadFilter
from reconciler.ops.health import HealthFacts, Level, judge
from reconciler.ops.links import discrepancy_url, event_url, page_url, to
from reconciler.ops.overview import BucketCount
from reconciler.ops.timerange import PRESETS, describe_span, parse_relative, relative_code

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


# -- readable values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("minor", "currency", "shown"),
    [
        (1163061, "eur", "€11,630.61"),
        (1163061, "EUR", "€11,630.61"),
        (500, "jpy", "¥500"),  # no minor unit
        (1234, "kwd", "KWD1.234"),  # three decimals
        (-250, "usd", "-$2.50"),
        (0, "gbp", "£0.00"),
        (None, "usd", "-"),
    ],
)
def test_money_is_major_units_with_the_currency(
    minor: int | None, currency: str, shown: str
) -> None:
    assert display.money(minor, currency) == shown


def test_money_without_a_currency_says_so() -> None:
    assert display.money(1200, None) == "1,200 (minor units, no currency)"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0 s"),
        (59.9, "59 s"),
        (60, "1 min"),
        (61, "1 min 1 s"),
        (3600, "1 h"),
        (8040, "2 h 14 min"),
        (86400 + 3600, "1 d 1 h"),
        (3 * 86400, "3 d"),
        (-5, "0 s"),
        (None, "-"),
    ],
)
def test_ages_read_in_two_units(seconds: float | None, shown: str) -> None:
    assert display.age(seconds) == shown


def test_times_are_iso_with_their_zone() -> None:
    at = datetime(2026, 12, 2, 3, 41, 7, 123456, tzinfo=UTC)
    assert display.when(at) == "2026-12-02T03:41:07+00:00"
    assert display.when(at, ZoneInfo("Europe/Berlin")) == "2026-12-02T04:41:07+01:00"
    assert display.when(at.replace(tzinfo=None)) == "2026-12-02T03:41:07+00:00"  # stored naive
    assert display.when(None) == "-"


def test_table_cells_never_show_none_or_python_reprs() -> None:
    frame = frames.table(
        [
            {
                "id": 12345678901234,
                "event_id": "evt_" + "x" * 60,
                "amount": 1163061,
                "currency": "eur",
                "at": datetime(2026, 12, 2, 3, 41, tzinfo=UTC),
                "took": 8040.0,
                "note": None,
                "body": b"{}",
            }
        ],
        money_columns={"amount": "currency"},
        age_columns=("took",),
    )
    row = frame.iloc[0].to_dict()
    assert row == {
        "id": 12345678901234,
        "event_id": "evt_" + "x" * 60,  # ids whole
        "amount": 11630.61,  # a number, in the currency's units: the table sorts it
        "currency": "EUR",
        "at": "2026-12-02T03:41:00+00:00",
        "took": "2 h 14 min",
        "note": "-",
        "body": "{}",
    }
    text = frame.to_string()
    assert "None" not in text and "datetime(" not in text


def test_counts() -> None:
    assert display.count(1, "event") == "1 event"
    assert display.count(1000, "event") == "1,000 events"


# -- links and URL state -----------------------------------------------------------------------


def test_links_are_the_urls_the_pages_keep() -> None:
    assert event_url("stripe", "evt_1") == "/events?source=stripe&event_id=evt_1"
    assert discrepancy_url(123, "https://ops.example.com/") == (
        "https://ops.example.com/discrepancies?id=123"
    )
    assert page_url("events", status=["pending", "failed"], prefix="") == (
        "/events?status=pending&status=failed"
    )
    link = to("dead_letters", source=["stripe"], since=None, refresh=True)
    assert link.query() == {"source": ["stripe"], "refresh": "1"}
    assert link.url() == "/dead_letters?source=stripe&refresh=1"
    assert page_url("events", q="a b&c") == "/events?q=a+b%26c"


@given(st.text(max_size=40))
def test_a_hostile_url_value_falls_back_to_the_default(raw: str) -> None:
    """Whatever the address bar holds, a page gets a valid value for each widget."""
    span = urlstate.decode(raw, None, parse=parse_relative)
    assert span is None or timedelta(minutes=1) <= span <= timedelta(days=400)
    ident = urlstate.decode(raw, None, parse=urlstate.parse_id)
    assert ident is None or 0 < ident < 2**63
    flag = urlstate.decode(raw, False, parse=urlstate.parse_bool)
    assert isinstance(flag, bool)
    when = urlstate.decode(raw, None, parse=urlstate.parse_time)
    assert when is None or when.tzinfo is not None
    status = urlstate.decode(raw, "open", choices=["open", "resolved", "ignored", "all"])
    assert status in ("open", "resolved", "ignored", "all")


def test_url_values_that_parse() -> None:
    assert urlstate.decode("now-7d", None, parse=parse_relative) == timedelta(days=7)
    assert urlstate.decode("7d", None, parse=parse_relative) == timedelta(days=7)  # older links
    assert urlstate.decode("42", None, parse=urlstate.parse_id) == 42
    assert urlstate.decode("0", None, parse=urlstate.parse_id) is None
    assert urlstate.decode(str(2**63), None, parse=urlstate.parse_id) is None
    assert urlstate.decode("2026-12-02T10:00", None, parse=urlstate.parse_time) == datetime(
        2026, 12, 2, 10, 0, tzinfo=UTC
    )
    assert urlstate.decode(None, "d") == "d"


@given(st.integers(1, 400 * 24 * 60))
def test_a_relative_range_reads_back_from_its_own_url_form(minutes: int) -> None:
    span = timedelta(minutes=minutes)
    assert parse_relative(relative_code(span)) == span
    label = describe_span(span)
    assert label in PRESETS or label.startswith("Last ")


def test_relative_ranges_as_links_write_them() -> None:
    assert parse_relative("now-1h") == timedelta(hours=1)
    assert describe_span(timedelta(hours=1)) == "Last hour"  # the preset's own name
    assert describe_span(timedelta(minutes=90)) == "Last 90 minutes"
    assert relative_code(timedelta(days=7)) == "now-7d"
    for bad in ("now-", "now-1w", "now--1h", "now-0m", "now-401d", "1.5h", "now-1h ; drop"):
        with pytest.raises(ValueError):
            parse_relative(bad)


# -- health --------------------------------------------------------------------------------------


def _facts(**kw: object) -> HealthFacts:
    base: dict[str, object] = {
        "now": NOW,
        "dead": 0,
        "stuck": 0,
        "oldest_unprocessed_age": None,
        "last_success": {"stripe": NOW - timedelta(hours=2)},
        "heartbeat": NOW - timedelta(seconds=30),
        "last_delivery": NOW - timedelta(minutes=3),
    }
    base.update(kw)
    return HealthFacts(**base)  # type: ignore[arg-type]


def _levels(facts: HealthFacts) -> dict[str, Level]:
    return {s.label: s.level for s in judge(facts, 3600, 60)}


def test_a_healthy_system_is_green() -> None:
    assert set(_levels(_facts()).values()) == {Level.OK}


def test_each_signal_turns_amber_then_red() -> None:
    assert _levels(_facts(dead=3))["Dead events"] is Level.BAD
    assert _levels(_facts(stuck=1))["Stuck events"] is Level.BAD
    assert _levels(_facts(oldest_unprocessed_age=2000))["Oldest unprocessed"] is Level.WARN
    assert _levels(_facts(oldest_unprocessed_age=4000))["Oldest unprocessed"] is Level.BAD
    late = {"stripe": NOW - timedelta(hours=25, minutes=30)}
    assert _levels(_facts(last_success=late))["Reconciled: stripe"] is Level.WARN
    missed = {"stripe": NOW - timedelta(hours=27)}
    assert _levels(_facts(last_success=missed))["Reconciled: stripe"] is Level.BAD
    assert _levels(_facts(last_success={"stripe": None}))["Reconciled: stripe"] is Level.WARN
    assert _levels(_facts(heartbeat=NOW - timedelta(minutes=5)))["Scheduler"] is Level.WARN
    assert _levels(_facts(heartbeat=NOW - timedelta(hours=1)))["Scheduler"] is Level.BAD
    assert _levels(_facts(heartbeat=None))["Scheduler"] is Level.WARN
    assert _levels(_facts(last_delivery=NOW - timedelta(hours=7)))["Last delivery"] is Level.WARN


def test_signals_link_to_what_they_count() -> None:
    signals = {s.label: s for s in judge(_facts(dead=2), 3600, 60)}
    assert signals["Dead events"].link is not None
    assert signals["Dead events"].link.url() == "/dead_letters"
    assert signals["Stuck events"].link.url() == (  # type: ignore[union-attr]
        "/events?status=pending&status=processing&status=failed"
    )
    assert signals["Reconciled: stripe"].value == "2 h ago"


# -- frames for charts ---------------------------------------------------------------------------


def test_counts_frame_is_timezone_aware_in_the_viewers_zone() -> None:
    width = 900
    bucket = int(NOW.timestamp()) // width
    counts = [
        BucketCount(bucket, "stripe", "accepted", 4),
        BucketCount(bucket, "github", "dead", 1),
    ]
    utc = frames.counts_frame(counts, width)
    assert str(utc["time"].dt.tz) == "UTC" and list(utc["n"]) == [1, 4]
    tokyo = frames.counts_frame(counts, width, ZoneInfo("Asia/Tokyo"))
    assert tokyo["time"].iloc[0].hour == 21 and tokyo["time"].iloc[0] == utc["time"].iloc[0]
    assert frames.counts_frame([], width).empty


def test_an_interrupted_attempt_counts_as_a_failed_attempt() -> None:
    """A killed or abandoned attempt is recorded ``interrupted``: the overview's "Failed attempts"
    still counts it, as it counted abandoned attempts before they had an outcome of their own."""
    from reconciler.ops.overview import Overview, kpis
    from reconciler.ops.timerange import TimeRange

    counts = [
        BucketCount(1, "stripe", "interrupted", 2),
        BucketCount(1, "stripe", "failed", 1),
        BucketCount(1, "stripe", "processed", 3),
    ]
    ov = Overview(
        TimeRange.last(timedelta(hours=1), NOW), 60, NOW, ("stripe",), [], counts, [], [], {}, []
    )
    [stripe] = kpis(ov, 3600)
    assert (stripe.failed, stripe.processed) == (3, 3)


def test_history_breaks_its_line_where_snapshots_stop() -> None:
    points = [("stripe", b, 5.0, 60.0) for b in (10, 11, 12, 20, 21)] + [("github", 10, 1.0, 0.0)]
    frame = frames.history_frame(points, 60, every_seconds=60)
    stripe = frame[frame["name"] == "stripe"]
    assert list(stripe["depth"].isna()) == [False, False, False, True, False, False]
    # snapshots every 5 minutes on 1-minute buckets: a gap of one interval is not a hole
    sparse = frames.history_frame(
        [("s", b, 1.0, 0.0) for b in (0, 5, 10, 30)], 60, every_seconds=300
    )
    assert list(sparse["depth"].isna()) == [False, False, False, True, False]


# -- dead-letter selections ------------------------------------------------------------------


def test_a_selection_describes_itself() -> None:
    assert DeadFilter().describe() == "dead events (all)"
    flt = DeadFilter(
        sources=("stripe",),
        types=("invoice.paid",),
        error_contains=" CRM ",
        received_from=datetime(2026, 12, 1, tzinfo=UTC),
        groups=(("stripe", "invoice.paid", "boom"),),
    )
    assert flt.describe() == (
        "dead events with 1 group(s); source stripe; type invoice.paid; error containing 'CRM'; "
        "received from 2026-12-01T00:00:00+00:00"
    )


# -- the demo's day ------------------------------------------------------------------------------


def test_the_day_fits_the_last_24_hours_and_keeps_each_senders_order() -> None:
    day = day_ending(NOW)
    assert NOW - timedelta(hours=24) < day.start < day.end < day.until < NOW
    streams = {"a": list(range(500)), "b": list(range(200))}
    arrivals = arrival_times(streams, day)
    times = [t for t, _, _ in arrivals]
    assert times == sorted(times) and day.start <= times[0] and times[-1] < day.end
    for name, items in streams.items():
        assert [x for _, n, x in arrivals if n == name] == items
    busy = sum(1 for t in times if t < day.start + (day.end - day.start) / 4)
    middle = sum(
        1
        for t in times
        if day.start + (day.end - day.start) * 3 / 8
        <= t
        < day.start + (day.end - day.start) * 5 / 8
    )
    assert middle > busy  # a busier middle of the day
    slots = list(day.slots())
    assert slots[0] == day.start and slots[1] - slots[0] == SLOT and slots[-1] < day.until
    begin, finish = day.incident
    assert day.in_incident(begin) and not day.in_incident(finish) and day.start < begin < day.end


def test_the_stepped_clock_never_goes_back() -> None:
    clock = SteppedClock(NOW - timedelta(hours=5))
    first = clock()
    clock.jump(NOW - timedelta(hours=6))  # back: ignored
    assert clock() >= first
    clock.jump(NOW - timedelta(hours=1))
    assert NOW - timedelta(hours=1) <= clock() < NOW
    assert clock().tzinfo is not None and clock().utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("minor", "currency", "expected"),
    [
        (1163061, "eur", (11630.61, "EUR")),
        (500, "JPY", (500.0, "JPY")),  # no minor unit
        (12345, "kwd", (12.345, "KWD")),  # three
        (700, "ZZZ", (700, "ZZZ (minor units)")),
        (700, None, (700, "no currency (minor units)")),
    ],
)
def test_money_tables_carry_major_units_and_the_currency_apart(
    minor: int, currency: str | None, expected: tuple[float, str]
) -> None:
    assert display.major_units(minor, currency) == expected


def test_a_csv_download_is_named_after_its_filter() -> None:
    from datetime import date

    from reconciler.reconcile.export import DiscrepancyFilter, csv_file_name

    day = date(2026, 12, 3)
    flt = DiscrepancyFilter(sources=("stripe",), kinds=("missing",), status="open")
    assert csv_file_name(flt, day) == "discrepancies-stripe-missing-open-20261203.csv"
    assert csv_file_name(DiscrepancyFilter(status="all"), day) == "discrepancies-all-20261203.csv"
    odd = DiscrepancyFilter(sources=("outbox:crm",), run_id="6f1c2a10-0000-11ef", status="open")
    assert csv_file_name(odd, day) == (
        "discrepancies-outbox_crm-open-run-6f1c2a10-0000-11ef-20261203.csv"
    )
    # a run id whole (a cut one names no run), whatever its length up to a UUID's 36 characters
    run = "0b7e2a4c-5d1f-4e8a-9c3b-2f6d8a1e7c90"
    assert f"-run-{run}-" in csv_file_name(DiscrepancyFilter(run_id=run), day)
