"""The release shape: ``pip install hookledger`` is the core, ``hookledger[dashboard]`` adds the
dashboard's stack. Fresh virtual environments, installed with ``constraints.txt`` (a known-good set),
``pip check`` clean; the core alone runs init, the sandbox, serve, send, worker, reconcile, doctor and
the demo without its dashboard, and says what to install for the dashboard.

Both environments install one wheel, built once from a fresh copy in an isolated build (as
``pip install <checkout>`` builds one, and as a release ships it); they install side by side, each
with a resolution of its own.

Slow (installs), so it runs where ``HOOKLEDGER_README_TEST=1`` (``.ci/run`` sets it)."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_readme_commands import _env, fresh_copy

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("HOOKLEDGER_README_TEST") != "1",
        reason="set HOOKLEDGER_README_TEST=1 to install into fresh environments (CI does)",
    ),
]
STACK = ("streamlit", "pandas", "plotly", "pyarrow")
# name: (extras, whether pip byte-compiles them). The core's commands start a dozen processes, each
# compiling what it imports again where no bytecode was written (PYTHONDONTWRITEBYTECODE); the
# dashboard's environment is imported once, so compiling all of its stack (plotly alone has thousands
# of modules) would cost more. pip ignores compile errors: nothing is verified less either way.
ENVIRONMENTS = {"core": ("", True), "dashboard": ("[dashboard,postgres]", False)}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pip(python: Path, *args: str) -> list[str]:
    # This interpreter's pip drives the fresh environment (``--python``), so that environment needs
    # no pip of its own and skips ensurepip.
    return [sys.executable, "-m", "pip", "--python", str(python), *args]


def _wheel(checkout: Path, out: Path) -> Path:
    """The checkout's wheel, built in an isolated environment as ``pip install <checkout>`` does."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(checkout)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=900,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = out.glob("hookledger-*.whl")
    return wheel


def _spawned(argv: list[str], **how: Any) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` from a pool thread, tried once more where the spawn itself failed with
    EFAULT: seen once on a loaded CI machine before the child ran anything, so nothing is repeated."""
    try:
        return subprocess.run(argv, **how)
    except OSError as error:
        if error.errno != errno.EFAULT:
            raise
        time.sleep(1)
        return subprocess.run(argv, **how)


def _venv(where: Path, wheel: Path, constraints: Path, extras: str, compile_: bool) -> Path:
    _spawned([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    install = ["install", "-q", "-c", str(constraints), *([] if compile_ else ["--no-compile"])]
    done = _spawned(
        _pip(python, *install, f"{wheel}{extras}"),
        capture_output=True,
        text=True,
        env=_env(),
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    check = _spawned(_pip(python, "check"), capture_output=True, text=True, env=_env())
    assert check.returncode == 0, check.stdout + check.stderr
    return where / "bin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Path]]]:
    """Each environment's ``bin`` directory, by name in ``ENVIRONMENTS``; they install side by side."""
    checkout = fresh_copy(tmp_path_factory.mktemp("checkout"))
    wheel = _wheel(checkout, tmp_path_factory.mktemp("wheel"))
    venvs = tmp_path_factory.mktemp("venvs")
    constraints = checkout / "constraints.txt"
    with ThreadPoolExecutor(max_workers=len(ENVIRONMENTS)) as pool:
        yield {
            name: pool.submit(_venv, venvs / name, wheel, constraints, *how)
            for name, how in ENVIRONMENTS.items()
        }


def _wait(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{url}: the process exited"
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer")


@pytest.mark.timeout(1800)
def test_the_core_installs_alone_and_runs_every_core_command(
    installed: dict[str, Future[Path]], tmp_path: Path
) -> None:
    bin_ = installed["core"].result()
    for module in STACK:  # the dashboard's stack is not there
        absent = subprocess.run([str(bin_ / "python"), "-c", f"import {module}"])
        assert absent.returncode != 0, module
    work = tmp_path / "work"
    work.mkdir()
    sandbox_port, receiver_port = _free_port(), _free_port()
    (work / "config.toml").write_text(
        f"""
[database]
url = "sqlite:///{work / "hookledger.db"}"

[receiver]
port = {receiver_port}

[[sources]]
name = "stripe"
kind = "stripe"
base_url = "http://127.0.0.1:{sandbox_port}"
api_key_env = "T_KEY"
signing_secret_env = "T_SECRET"
initial_lookback_hours = 48
"""
    )
    env = {**_env(), "T_KEY": "sk_test_sandbox", "T_SECRET": "whsec_install_test"}
    env["HOOKLEDGER_CONFIG"] = str(work / "config.toml")
    hookledger = str(bin_ / "hookledger")

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [hookledger, *argv], cwd=work, env=env, capture_output=True, text=True, timeout=300
        )

    assert run("init").returncode == 0
    sandbox = subprocess.Popen(
        [hookledger, "sandbox", "--port", str(sandbox_port)],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = subprocess.Popen(
        [hookledger, "serve"],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(f"http://127.0.0.1:{sandbox_port}/_sandbox/health", sandbox)
        _wait(f"http://127.0.0.1:{receiver_port}/healthz", server)
        sent = run("send", "stripe", "--count", "2")
        assert sent.returncode == 0 and sent.stdout.count("HTTP 200 accepted") == 2, sent
        worked = run("worker", "--once")
        assert worked.returncode == 0, worked.stderr
        listed = run("events", "list", "--source", "stripe")
        assert listed.stdout.strip().splitlines()[-1] == "2 of 2", listed.stdout
        reconciled = run("reconcile", "--source", "stripe")
        assert reconciled.returncode == 0 and "stripe: succeeded" in reconciled.stdout, reconciled
        doctor = run("doctor")
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    finally:
        for proc in (server, sandbox):
            proc.terminate()
            proc.wait(timeout=30)
    for command in (("dashboard",), ("demo", "--dir", str(work / "demo"))):
        refused = run(*command)
        assert refused.returncode == 2, refused
        assert "pip install 'hookledger[dashboard]'" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    demo = run("demo", "--no-dashboard", "--events", "120", "--dir", str(work / "demo"))
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]


@pytest.mark.timeout(1800)
def test_the_dashboard_extra_installs_with_the_constraints_and_pip_check_is_clean(
    installed: dict[str, Future[Path]],
) -> None:
    bin_ = installed["dashboard"].result()
    imported = subprocess.run(
        [str(bin_ / "python"), "-c", "import streamlit, pandas, plotly, pyarrow, psycopg"],
        capture_output=True,
        text=True,
    )
    assert imported.returncode == 0, imported.stderr
