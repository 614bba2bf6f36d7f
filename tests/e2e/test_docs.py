"""The reference pages are what the code gives (``python -m reconciler.docs`` writes them): every
setting with its default and a note saying what it means, every command with its usage, examples
and exit statuses; and the README keeps its two commands and its short shape."""

from __future__ import annotations

from pathlib import Path

from reconciler.cli.main import build_parser
from reconciler.docs import CLI, CONFIGURATION, cli_markdown, configuration_markdown, stale_notes

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
REGENERATE = "regenerate with: python -m reconciler.docs"


def test_the_configuration_reference_is_the_settings_models() -> None:
    # fails with the setting named when one has no note in docs/settings-notes.toml
    assert CONFIGURATION.read_text() == configuration_markdown(), REGENERATE
    assert stale_notes() == [], "docs/settings-notes.toml names settings that do not exist"


def test_the_cli_reference_is_the_parser() -> None:
    assert CLI.read_text() == cli_markdown(), REGENERATE
    text = CLI.read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in sub.choices:  # type: ignore[attr-defined]
        assert f"## `hookledger {name}" in text, name


def test_the_readme_is_one_screen_with_its_two_commands() -> None:
    assert "<!-- run-command -->" in README and "<!-- test-command -->" in README
    assert len(README.splitlines()) <= 150
    for link in ("docs/configuration.md", "docs/cli.md", "docs/operations.md"):
        assert f"]({link})" in README
