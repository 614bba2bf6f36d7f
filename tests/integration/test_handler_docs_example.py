"""docs/handlers.md's "Testing a handler" example, as a handler author would run it: its handler
module and its test written out of the page into a project of their own, with the conftest line
the page names, run by pytest in a fresh process. It passes once per way; and what the page says
the ways catch, they catch: a handler that keeps its last write fails ``reversed``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "handlers.md").read_text()


def block(first_line: str) -> str:
    """The page's Python block whose first line starts with ``first_line``."""
    for code in re.findall(r"```python\n(.*?)```", PAGE, re.S):
        if code.startswith(first_line):
            return str(code)
    raise AssertionError(f"docs/handlers.md has no block starting {first_line!r}")


def project(where: Path, handler_code: str) -> Path:
    (where / "myapp").mkdir()
    (where / "myapp" / "__init__.py").write_text("")
    (where / "myapp" / "invoices.py").write_text(handler_code)
    (where / "tests").mkdir()
    (where / "tests" / "conftest.py").write_text('pytest_plugins = ["hookledger.pytest_plugin"]\n')
    (where / "tests" / "test_invoices.py").write_text(block("# tests/test_invoices.py"))
    return where


def run_pytest(where: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(where)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_pages_handler_test_passes_once_for_each_way(tmp_path: Path) -> None:
    done = run_pytest(project(tmp_path, block("# myapp/invoices.py")))

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "5 passed" in done.stdout, done.stdout[-2000:]


def test_a_handler_that_keeps_its_last_write_fails_reversed_as_the_page_says(
    tmp_path: Path,
) -> None:
    code = block("# myapp/invoices.py")
    # the version becomes the time of writing: whatever is written last wins, a plain UPDATE
    last_write = code.replace('event.payload["created"]', '__import__("time").time_ns()')
    assert last_write != code

    done = run_pytest(project(tmp_path, last_write))

    assert done.returncode == 1, done.stdout[-3000:]
    failed = set(re.findall(r"FAILED \S+\[(\w+)\]", done.stdout))
    assert "reversed" in failed and "once" not in failed, done.stdout[-3000:]
