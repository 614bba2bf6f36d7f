"""The README's two commands, exactly as written, in a fresh copy of the project with fresh virtual
environments: the demo (stopped with Ctrl-C once its dashboard answers) and the test suite.

Slow (an install and a demo run), so it runs where ``HOOKLEDGER_README_TEST=1`` (``.ci/run`` sets it).
The test command's check runs the whole suite a second time inside this one, so it also needs
``HOOKLEDGER_README_SUITE=1``: ``.ci/run`` leaves that unset because it already runs the README's test
command itself on a clean clone with a fresh environment, which is the same check. Its inner run gets
``HOOKLEDGER_README_INNER=1`` so it does not recurse.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("HOOKLEDGER_README_INNER") == "1", reason="inside this test's own run"
    ),
    pytest.mark.skipif(
        os.environ.get("HOOKLEDGER_README_TEST") != "1",
        reason="set HOOKLEDGER_README_TEST=1 to run the README's commands (CI does)",
    ),
]


def readme_command(marker: str) -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- {marker} -->\s*```bash\n(.*?)\n```", text, flags=re.S)
    assert match, f"README.md has no ```bash block under <!-- {marker} -->"
    return match.group(1).strip()


def fresh_copy(dest: Path) -> Path:
    """The project's files as a clone would have them (tracked and new, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv_bin = str(Path(os.environ.get("VIRTUAL_ENV", "/nonexistent")) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    env.pop("HOOKLEDGER_README_TEST", None)
    env.pop("HOOKLEDGER_README_SUITE", None)
    env.update(extra)
    return env


@pytest.mark.timeout(1200)
def test_the_run_command_installs_and_runs_the_demo(tmp_path: Path) -> None:
    checkout = fresh_copy(tmp_path / "demo-checkout")
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", readme_command("run-command")],
            cwd=checkout,
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C goes to the whole group, as in a terminal
        )
        try:
            deadline = time.monotonic() + 900
            while "Dashboard: http://127.0.0.1:8501" not in log.read_text(errors="replace"):
                assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
                assert time.monotonic() < deadline, "the demo did not reach its dashboard"
                time.sleep(1)
            for _ in range(60):
                try:
                    if httpx.get("http://127.0.0.1:8501/_stcore/health", timeout=2).text == "ok":
                        break
                except httpx.TransportError:
                    time.sleep(1)
            else:
                pytest.fail("the dashboard never answered on 127.0.0.1:8501")
            os.killpg(proc.pid, signal.SIGINT)
            rc = proc.wait(timeout=90)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    output = log.read_text(errors="replace")
    assert rc == 0, output[-3000:]
    assert "found exactly what the sandbox did" in output
    assert (checkout / "var" / "demo" / "truth.json").is_file()


@pytest.mark.timeout(2700)
@pytest.mark.skipif(
    os.environ.get("HOOKLEDGER_README_SUITE") != "1",
    reason="set HOOKLEDGER_README_SUITE=1 as well (.ci/run runs the README's test command itself)",
)
def test_the_test_command_installs_and_passes(tmp_path: Path) -> None:
    checkout = fresh_copy(tmp_path / "test-checkout")
    done = subprocess.run(
        ["bash", "-c", readme_command("test-command")],
        cwd=checkout,
        env=_env(HOOKLEDGER_README_INNER="1"),
        capture_output=True,
        timeout=2400,
    )
    # pip's warnings go to stderr, pytest's summary to stdout: the summary last, where a failure's
    # message shows it
    output = done.stderr.decode(errors="replace") + done.stdout.decode(errors="replace")
    assert done.returncode == 0, output[-5000:]
    assert re.search(r"\d+ passed", output), output[-2000:]
