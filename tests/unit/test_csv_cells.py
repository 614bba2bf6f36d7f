"""CSV cells are safe to open in a spreadsheet (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reconciler.reconcile.compare import FORMULA_PREFIXES, csv_cell


def test_formula_starts_are_neutralised_in_ascii_and_full_width() -> None:
    for value in [
        "=1+1",
        "+1",
        "-1",
        "@SUM(A1)",
        "\tx",
        "\rx",
        "\uff1d1+1",
        "\uff0b1",
        "\uff0d1",
        "\uff20SUM(A1)",
    ]:
        assert csv_cell(value) == "'" + value
    assert csv_cell("a\x00b") == "ab"
    assert csv_cell("\x00=HYPERLINK(1)") == "'=HYPERLINK(1)"  # a NUL cannot hide a formula
    assert csv_cell("plain") == "plain" and csv_cell(None) == ""


@given(st.text())
def test_any_text_becomes_a_cell_without_nul_that_no_spreadsheet_runs(value: str) -> None:
    cell = csv_cell(value)
    kept = value.replace("\x00", "")
    assert "\x00" not in cell and not cell.startswith(FORMULA_PREFIXES)
    assert cell in (kept, "'" + kept)  # nothing else changes
