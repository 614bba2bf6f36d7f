"""The README documents every setting and every command (fails when one is added silently)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from reconciler.cli.main import build_parser
from reconciler.config import (
    CheckSettings,
    DashboardAuthSettings,
    OutboxTargetSettings,
    Settings,
)

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _reference_rows() -> set[tuple[str, str]]:
    rows = set()
    for table, key in re.findall(r"^\| `(\[\[?[\w.]+\]\]?)` \| `(\w+)` \|", README, flags=re.M):
        rows.add((table.strip("[]"), key))
    return rows


def test_every_setting_is_in_the_configuration_reference() -> None:
    documented = _reference_rows()
    missing = []
    for table, field in Settings.model_fields.items():
        annotation = field.annotation
        model = getattr(annotation, "__args__", (annotation,))[0]
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for name, info in model.model_fields.items():
            key = info.alias or name  # (what the file says: [[notify]] from)
            if (table, key) not in documented:
                missing.append(f"[{table}] {key}")
    for key in DashboardAuthSettings.model_fields:
        if ("dashboard.auth", key) not in documented:
            missing.append(f"[dashboard.auth] {key}")
    for key in CheckSettings.model_fields:
        if ("sources.checks", key) not in documented:
            missing.append(f"[[sources.checks]] {key}")
    for key in OutboxTargetSettings.model_fields:
        if ("outbox.targets", key) not in documented:
            missing.append(f"[[outbox.targets]] {key}")
    assert missing == []


def test_every_command_is_in_the_cli_reference() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, cmd in sub.choices.items():  # type: ignore[attr-defined]
        nested = [
            a
            for a in cmd._actions
            if a.dest in ("events_command", "discrepancies_command", "outbox_command")
        ]
        names = [f"{name} {n}" for n in nested[0].choices] if nested else [name]
        for full in names:
            assert f"`hookledger {full}" in README, full


def test_the_two_commands_are_marked() -> None:
    assert "<!-- run-command -->" in README and "<!-- test-command -->" in README
