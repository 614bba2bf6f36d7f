"""Every command's --help says what it does, shows examples that parse, and lists its exit statuses;
`hookledger --version`; shell completion through argcomplete."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler import __version__
from reconciler.cli.help import COMMANDS
from reconciler.cli.main import build_parser, main

HOOKLEDGER = Path(sys.executable).with_name("hookledger")


def leaf_commands() -> list[str]:
    out: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    before = len(out)
                    walk(sub, (*path, name))
                    if len(out) == before:
                        out.append(" ".join((*path, name)))

    walk(build_parser(), ())
    return out


def test_every_command_is_documented_and_nothing_else() -> None:
    assert sorted(leaf_commands()) == sorted(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_has_a_description_examples_and_exit_statuses(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command.split(), "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    entry = COMMANDS[command]
    assert " ".join(text.split()).count(" ".join(entry.description.split()[:6])) == 1
    assert "\nexamples:\n" in text and "\nexit status:\n" in text
    assert all(f"  {example}\n" in text for example in entry.examples)
    assert any(line.startswith("  0 ") for line in text.splitlines())
    assert any(line.startswith("  2 ") for line in text.splitlines())


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_example_is_a_command_line_hookledger_accepts(command: str) -> None:
    parser = build_parser()
    for example in COMMANDS[command].examples:
        argv = shlex.split(example)
        assert argv[0] == "hookledger" and " ".join(argv[1:]).startswith(command)
        parser.parse_args(argv[1:])  # SystemExit(2) on an option that does not exist


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"hookledger {__version__}"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("hookledger rec", {"reconcile"}),
        ("hookledger outbox ", {"list", "show", "replay", "recover", "pause", "resume"}),
        ("hookledger doctor --o", {"--offline"}),
    ],
)
def test_the_shell_completes_commands_and_options(
    line: str, expected: set[str], tmp_path: Path
) -> None:
    out = tmp_path / "completions"
    env = dict(
        os.environ,
        _ARGCOMPLETE="1",
        _ARGCOMPLETE_IFS="\n",
        COMP_LINE=line,
        COMP_POINT=str(len(line)),
        _ARGCOMPLETE_STDOUT_FILENAME=str(out),
    )
    result = subprocess.run(
        [str(HOOKLEDGER)], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    words = {word.strip() for word in out.read_text().split("\n") if word.strip()}
    assert expected <= words and not {w for w in words if not w.startswith("-")} - expected
