"""Card numbers (Luhn) and IBANs (mod 97) are masked inside any text (issue 34), and text that
holds neither is left as it is. Pure: no I/O."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from reconciler.ops.masking import Masker
from reconciler.payment_text import MASK, is_payment_data, mask_payment_text


def _luhn_complete(body: str) -> str:
    """``body`` with the check digit that makes it pass Luhn."""
    for check in "0123456789":
        digits = body + check
        total = 0
        for i, ch in enumerate(reversed(digits)):
            d = int(ch)
            if i % 2:
                d = d * 2 - 9 if d > 4 else d * 2
            total += d
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def _iban(country: str, bban: str) -> str:
    rearranged = bban + country + "00"
    check = 98 - int("".join(str(int(c, 36)) for c in rearranged)) % 97
    return f"{country}{check:02d}{bban}"


def _grouped(value: str, sep: str, size: int = 4) -> str:
    return sep.join(value[i : i + size] for i in range(0, len(value), size))


pans = st.builds(
    lambda first, rest: _luhn_complete(first + rest),
    st.sampled_from("23456"),
    st.integers(11, 17).flatmap(lambda n: st.text("0123456789", min_size=n, max_size=n)),
)
ibans = st.builds(
    _iban,
    st.text(string.ascii_uppercase, min_size=2, max_size=2),
    st.integers(11, 30).flatmap(
        lambda n: st.text(string.ascii_uppercase + string.digits, min_size=n, max_size=n)
    ),
)
# Text around the number: no digits or capitals touching it (they would make it a longer value).
around = st.text(st.characters(blacklist_categories=("Nd", "Lu", "Cs")), max_size=30)
sep = st.sampled_from(["", " ", "-"])


@given(pan=pans, before=around, after=around, separator=sep)
def test_a_card_number_inside_any_text_is_masked(
    pan: str, before: str, after: str, separator: str
) -> None:
    shown = _grouped(pan, separator)
    text = f"{before} {shown} {after}"
    masked = mask_payment_text(text)
    assert pan not in masked.replace(" ", "").replace("-", "")
    assert masked == f"{before} {MASK} {after}"


@given(iban=ibans, before=around, after=around, spaced=st.booleans())
def test_an_iban_inside_any_text_is_masked(
    iban: str, before: str, after: str, spaced: bool
) -> None:
    shown = _grouped(iban, " ") if spaced else iban
    masked = mask_payment_text(f"{before} {shown} {after}")
    assert masked == f"{before} {MASK} {after}"


@given(pan=pans, iban=ibans, words=st.lists(around, min_size=3, max_size=3))
def test_several_in_one_text_and_in_a_payload_string(pan: str, iban: str, words: list[str]) -> None:
    text = f"{words[0]} {_grouped(pan, ' ')} {words[1]} {_grouped(iban, ' ')} {words[2]}"
    assert mask_payment_text(text) == f"{words[0]} {MASK} {words[1]} {MASK} {words[2]}"
    masked = Masker().mask({"description": text, "n": int(pan)})
    assert masked["description"] == mask_payment_text(text)
    assert masked["n"] == int(pan)  # a JSON number is an id, never masked


@given(text=st.text(max_size=60))
def test_text_is_left_alone_unless_it_holds_a_checked_number(text: str) -> None:
    masked = mask_payment_text(text)
    if MASK not in masked:
        assert masked == text
    assert mask_payment_text(masked) == masked  # masking again changes nothing


def test_numbers_that_are_not_cards_are_left_alone() -> None:
    for text in (
        "order 1234567890123",  # fails Luhn
        "ts 1733300000000",  # starts with 1
        "2026-12-04 10:00",
        "id 79927398713",  # passes Luhn, 11 digits
        "run 4242 4242 4242 4242 4242 4242",  # 24 digits: the first 16 are a card
    ):
        if text.startswith("run"):
            assert mask_payment_text(text).startswith(f"run {MASK}")
        else:
            assert mask_payment_text(text) == text
    assert is_payment_data("4242 4242 4242 4242") and is_payment_data("DE89370400440532013000")


def _printed(pan: str) -> str:
    """A card number grouped with dots as issuers print it (4-6-5 for 15 digits, else fours)."""
    if len(pan) == 15:
        return f"{pan[:4]}.{pan[4:10]}.{pan[10:]}"
    return _grouped(pan, ".")


@given(pan=pans, before=around, after=around)
def test_a_card_number_printed_with_dots_is_masked(pan: str, before: str, after: str) -> None:
    text = f"{before} {_printed(pan)} {after}"
    assert mask_payment_text(text) == f"{before} {MASK} {after}"
    assert is_payment_data(_printed(pan))
    assert Masker().mask({"ref": f"card:{_printed(pan)}."})["ref"] == f"card:{MASK}."


@given(
    version=st.lists(st.integers(0, 999), min_size=2, max_size=6),
    ip=st.tuples(*[st.integers(0, 255)] * 4),
    when=st.datetimes(),
    before=around,
)
def test_versions_addresses_and_dotted_times_are_left_alone(
    version: list[int], ip: tuple[int, ...], when: object, before: str
) -> None:
    import datetime as dt

    assert isinstance(when, dt.datetime)
    for text in (
        "v" + ".".join(map(str, version)),
        ".".join(map(str, ip)),
        when.strftime("%Y.%m.%d.%H.%M.%S"),
        when.strftime("%Y%m%d.%H%M%S.%f"),
        when.strftime("%d.%m.%Y %H.%M.%S"),
    ):
        assert mask_payment_text(f"{before} {text}") == f"{before} {text}"
