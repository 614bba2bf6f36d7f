"""Card numbers and IBANs found by their value, whole or inside any text (pure).

A card number is a run of 13-19 digits, spaces or dashes allowed between groups, starting with 2-6
(Mastercard 2-series, Amex, Visa, Mastercard, Discover/UnionPay: long numeric ids starting
otherwise are left alone) and passing the Luhn check. Dots between groups count only in a card's
printed grouping (4-4-4-4 and longer, the last group 1-4 digits; Amex's 4-6-5; Diners' 4-6-4), so
version strings, IP addresses and dotted dates or times are left alone. An IBAN is two letters, two check digits and
11-30 letters or digits, in groups of four or compact, passing its mod-97 check. Numbers stored as
JSON numbers (ids) are never touched: only text is read.
"""

from __future__ import annotations

import re

MASK = "<masked>"
_CARD = re.compile(r"\d(?:[ -]?\d){12,18}")
_IBAN = re.compile(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}")
# Digit groups joined by one space or dash (a card as printed), not inside a longer number.
_DIGIT_RUN = re.compile(r"(?<!\d)\d+(?:[ -]\d+)*(?!\d)")
_GROUP = re.compile(r"\d+")
# A card printed with dots: its groups as card issuers print them, not inside a longer dotted run.
_DOTTED = re.compile(
    r"(?<!\d)(?<!\d\.)(?:\d{4}(?:\.\d{4}){2,3}\.\d{1,4}|\d{4}\.\d{6}\.\d{4,5})(?!\d|\.\d)"
)
# An IBAN's start and the groups that may follow it; cut back to a group boundary until it checks.
_IBAN_RUN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]+)+")
_IBAN_GROUP = re.compile(r"[A-Z0-9]+")
CARD_DIGITS = range(13, 20)
IBAN_CHARS = range(15, 35)


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(digits: str) -> bool:
    return len(digits) in CARD_DIGITS and digits[0] in "23456" and _luhn(digits)


def _iban_valid(text: str) -> bool:
    compact = text.replace(" ", "")
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def is_payment_data(value: str) -> bool:
    """The whole value is a card number or an IBAN."""
    text = value.strip()
    if _CARD.fullmatch(text) or _DOTTED.fullmatch(text):
        return _card(re.sub(r"[ .-]", "", text))
    return bool(_IBAN.fullmatch(text)) and _iban_valid(text)


def _card_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    for run in _DIGIT_RUN.finditer(text):
        groups = [(m.start() + run.start(), m.end() + run.start()) for m in _GROUP.finditer(run[0])]
        i = 0
        while i < len(groups):
            found = None
            digits = ""
            for j in range(i, len(groups)):
                digits += text[groups[j][0] : groups[j][1]]
                if len(digits) > CARD_DIGITS.stop - 1:
                    break
                if _card(digits):
                    found = j  # the longest card starting at group i
            if found is None:
                i += 1
                continue
            spans.append((groups[i][0], groups[found][1]))
            i = found + 1
    spans += [m.span() for m in _DOTTED.finditer(text) if _card(m[0].replace(".", ""))]
    return spans


def _iban_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    for run in _IBAN_RUN.finditer(text):
        ends = [m.end() + run.start() for m in _IBAN_GROUP.finditer(run[0])]
        for end in reversed(ends):  # the longest prefix that checks
            candidate = text[run.start() : end]
            if len(candidate.replace(" ", "")) in IBAN_CHARS and _iban_valid(candidate):
                spans.append((run.start(), end))
                break
    return spans


def mask_payment_text(text: str, mask: str = MASK) -> str:
    """The text with every card number and IBAN in it replaced by ``mask``."""
    if not any(c.isdigit() for c in text):
        return text
    spans = sorted(_card_spans(text) + _iban_spans(text))
    if not spans:
        return text
    out, at = [], 0
    for start, end in spans:
        if start < at:  # overlaps a span already masked
            start = at
        if start >= end:
            continue
        out.append(text[at:start])
        out.append(mask)
        at = end
    out.append(text[at:])
    return "".join(out)
