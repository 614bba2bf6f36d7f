"""The demo's moving parts: servers on 127.0.0.1 threads, background loops, and the dashboard
process it keeps open until Ctrl-C."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from reconciler.errors import HookledgerError


def bind() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def serving(app: Any, sock: socket.socket) -> Iterator[None]:
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", log_config=None)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise HookledgerError("a demo server did not start")
        time.sleep(0.02)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def background(target: Callable[[threading.Event], None]) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=target, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


def answers(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> bool:
    """Whether the process answers ``url`` with 200 before it exits or the time is up: the URL is
    printed only once it opens."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    return False


def dashboard_until_interrupted(console: Console, config_path: Path, port: int) -> None:
    from reconciler.dashboard_process import streamlit_argv

    env = {**os.environ, "HOOKLEDGER_CONFIG": str(config_path)}
    # `kill PID` or a closed terminal stops the demo as Ctrl-C does: its dashboard child too, or the
    # child would keep the port
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    proc = subprocess.Popen(streamlit_argv("127.0.0.1", port, None), env=env)
    try:
        if not answers(f"http://127.0.0.1:{port}/_stcore/health", proc):
            console.print(f"[red]The dashboard did not start on port {port}[/red] (see above).")
            return
        console.print(
            f"\n[bold]Dashboard: http://127.0.0.1:{port}[/bold]  (sandbox, receiver and worker "
            "keep running; Ctrl-C stops everything)\n"
            f"Other commands on this demo: set -a; . {config_path.parent}/demo.env; set +a; then "
            f"hookledger <command> --config {config_path}"
        )
        if shutil.which("xdg-open") and os.environ.get("DISPLAY"):
            subprocess.Popen(
                ["xdg-open", f"http://127.0.0.1:{port}"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        while proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        console.print("stopping the demo ...")
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
