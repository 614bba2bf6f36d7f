"""`kill PID` of `hookledger demo` stops its dashboard child (SIGTERM and SIGHUP, as Ctrl-C does)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


CHILD_OF_THE_DEMO = """
import sys
from pathlib import Path
from rich.console import Console
import reconciler.dashboard_process as dashboard_process
from reconciler.demo import serving

pid_file = Path(sys.argv[1])
# the dashboard's place taken by a child that only waits, and writes its pid
dashboard_process.streamlit_argv = lambda host, port, secrets: [
    sys.executable, "-c",
    f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)",
]
serving.dashboard_until_interrupted(Console(), Path("config.toml"), 8599)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_kill_of_the_demo_stops_its_dashboard_child(tmp_path: Path, sig: signal.Signals) -> None:
    """Issue 34: `kill PID` of `hookledger demo` left its Streamlit child holding the port."""
    pid_file = tmp_path / "child.pid"
    demo = subprocess.Popen(
        [sys.executable, "-c", CHILD_OF_THE_DEMO, str(pid_file)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and demo.poll() is None, "the child never started"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    demo.send_signal(sig)
    demo.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a child that exited but was not reaped yet is a zombie: gone for our purpose
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"
