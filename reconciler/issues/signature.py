"""The pure core of issues: an error's normalised signature and the key that groups failures.

Two failures belong to one issue when they are of one kind, from one source and type, and their
errors differ only in the values they carry (ids, numbers, amounts, quoted values, e-mail
addresses), as Sentry's and Hookdeck's grouping do. No I/O here: the refresh and the tests call it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reconciler.states import IssueKind

SIGNATURE_MAX = 200  # characters of a signature (the column holds 255)
SUBJECT_MAX = 255  # the source and type columns' width
NO_ERROR = "(no error text)"


# Order matters: a quoted value may hold an e-mail or a UUID, and a UUID holds hex runs and numbers;
# the widest pattern goes first so that what it stands for is replaced once, as a whole.
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # quoted values: the quote must not follow a letter, so the apostrophe of "can't" opens nothing
    (re.compile(r"""(?<![\w'"`])(['"`])[^'"`\r\n]{0,500}?\1(?!\w)"""), "<str>"),
    (re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"), "<email>"),
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}\b"
        ),
        "<uuid>",
    ),
    (re.compile(r"\b0[xX][0-9a-fA-F]+\b"), "<hex>"),
    # provider ids without a digit (Stripe's base62 ids: cus_NffrFeUfNV2Hib, some all letters)
    (re.compile(r"\b[a-z]{2,12}_(?=[a-z]*[A-Z0-9])[A-Za-z0-9]{8,}\b"), "<id>"),
    # any token with a digit in it: ids (evt_1Nx, gid://shopify/Order/42), counts, amounts, times
    (re.compile(r"[\w./:-]*\d[\w./:-]*"), "<n>"),
)
_SPACE = re.compile(r"\s+")


def signature(error: str | None) -> str:
    """The error with its values stripped and its whitespace collapsed, at most
    :data:`SIGNATURE_MAX` characters; never raises, whatever the text."""
    if error is None or not error.strip():
        return NO_ERROR
    text = error[:4000]  # a traceback's first screen decides; the rest only costs time
    for pattern, placeholder in _RULES:
        text = pattern.sub(placeholder, text)
    text = _SPACE.sub(" ", text).strip()
    return text[:SIGNATURE_MAX].rstrip() or NO_ERROR


@dataclass(frozen=True, order=True)
class GroupKey:
    """What makes failures one issue: the kind of failure, the source (``outbox:<target>`` for
    the outbox), the type (event type, discrepancy kind; ``""`` when there is none) and the
    signature. Unique in ``hookledger_issues``."""

    kind: IssueKind
    source: str
    type: str
    signature: str


def group_key(kind: IssueKind, source: str, type_: str | None, error: str | None) -> GroupKey:
    """The key of one failure: bounded to the columns' widths, so any text gives a storable key."""
    return GroupKey(kind, source[:SUBJECT_MAX], (type_ or "")[:SUBJECT_MAX], signature(error))
