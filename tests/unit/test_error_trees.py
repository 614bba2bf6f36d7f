"""The exception trees drawn in the docstrings of ``connectors.errors`` and ``reconciler.errors``
are the classes' own: each drawn class exists there and its parent is the one drawn above it
(pure: reads the docstrings and the classes)."""

from __future__ import annotations

import re
from types import ModuleType

import pytest

import connectors.errors
import reconciler.errors

_LINE = re.compile(r"^(?P<indent>[ │├└─]*?)(?P<name>[A-Z][A-Za-z]+)\b")


def drawn_parents(module: ModuleType) -> dict[str, str | None]:
    """Each class named in the module's drawing with the class drawn as its parent."""
    doc = module.__doc__ or ""
    drawing = doc.split("::", 1)[1].split("\n\n", 2)[1]
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []  # (depth, name) of the branch above
    for line in drawing.splitlines():
        match = _LINE.match(line.strip("\n")[4:])  # (the block's own indent of four)
        if not match:
            continue
        depth = len(match["indent"]) // 4
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[match["name"]] = stack[-1][1] if stack else None
        stack.append((depth, match["name"]))
    return parents


def _named(name: str) -> type:
    """A drawn class: reconciler.errors draws connectors.errors' ConnectorError as well."""
    found = getattr(reconciler.errors, name, None) or getattr(connectors.errors, name)
    assert isinstance(found, type)
    return found


@pytest.mark.parametrize("module", [connectors.errors, reconciler.errors], ids=lambda m: m.__name__)
def test_each_drawn_class_has_the_parent_drawn_above_it(module: ModuleType) -> None:
    parents = drawn_parents(module)
    assert len(parents) >= 6
    for name, parent in parents.items():
        cls = _named(name)
        if parent is None:
            assert cls.__bases__ == (Exception,), name
        else:
            assert cls.__bases__ == (_named(parent),), f"{name} drawn under {parent}"


def test_every_error_class_of_the_connectors_is_drawn() -> None:
    classes = {
        name
        for name, value in vars(connectors.errors).items()
        if isinstance(value, type) and issubclass(value, Exception)
    }
    assert classes == set(drawn_parents(connectors.errors))
