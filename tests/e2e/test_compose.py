"""deploy/compose.yaml, run the way this machine can (it cannot build images): each hookledger
service's command line as a process against PostgreSQL, with the compose file's environment and
configuration, until its own health check passes; then each stops on its stop signal in time."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.storage.testing import scratch_postgres_schema

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
HOOKLEDGER = Path(sys.executable).with_name("hookledger")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# what an operator puts where the example says change_me (a Standard Webhooks secret is base64)
FILLED_IN = {"HOOKLEDGER_CRM_SIGNING_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}


def env_file() -> dict[str, str]:
    lines = (DEPLOY / "hookledger.env.example").read_text().splitlines()
    example = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    # no secret in the example works as it is: each one is a placeholder to fill in
    assert all(value.endswith("change_me") for value in example.values()), example
    return example | FILLED_IN


def seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)s", value)
    assert match, value
    return float(match.group(1))


@pytest.fixture
def database() -> Iterator[str]:
    """A PostgreSQL schema of its own, created empty as the compose file's postgres starts:
    its init service creates the tables (and the scheduler's snapshots stay out of other tests)."""
    base = os.environ.get("HOOKLEDGER_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("HOOKLEDGER_TEST_POSTGRES_URL is not set")
    with scratch_postgres_schema(base, prefix="hl_compose", revision=None) as url:
        yield url


def test_the_compose_file_runs_every_hookledger_service_until_healthy(
    database: str, tmp_path: Path
) -> None:
    pg_url = database
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services: dict[str, Any] = compose["services"]
    ours = {n: s for n, s in services.items() if s.get("image") == "hookledger:latest"}
    assert set(ours) == {"init", "receiver", "worker", "publisher", "scheduler", "dashboard"}
    assert all(s["healthcheck"]["test"] for n, s in services.items() if n != "init")
    # no password in the compose file: deploy/.env (from .env.example) holds it
    text = (DEPLOY / "compose.yaml").read_text()
    assert "${POSTGRES_PASSWORD:?" in text and "POSTGRES_PASSWORD: hookledger" not in text
    assert "POSTGRES_PASSWORD=" in (DEPLOY / ".env.example").read_text()
    assert services["receiver"]["ports"] == ["127.0.0.1:8000:8000"]  # a proxy faces the world
    assert services["scheduler"]["healthcheck"]["test"][2:4] == ["schedule", "--check-heartbeat"]
    # the configuration compose mounts, listening on loopback ports of this machine's choosing
    ports = {"8000": free_port(), "8501": free_port(), "9101": free_port()}
    config = (DEPLOY / "config.toml").read_text().replace("0.0.0.0", "127.0.0.1")
    config = config.replace("metrics_port = 9101", f"metrics_port = {ports['9101']}")
    (tmp_path / "config.toml").write_text(config)

    def localised(words: list[str]) -> list[str]:
        out = []
        for word in words:
            word = word.replace("0.0.0.0", "127.0.0.1")
            for port, mine in ports.items():
                word = re.sub(rf"\b{port}\b", str(mine), word)
            out.append(word)
        return out

    def environment(service: dict[str, Any]) -> dict[str, str]:
        env = {**os.environ, **env_file(), **service.get("environment", {})}
        env["HOOKLEDGER_DATABASE_URL"] = pg_url  # the compose network's postgres, here
        env["HOOKLEDGER_CONFIG"] = str(tmp_path / "config.toml")
        env["HOME"] = str(tmp_path)  # (Streamlit keeps its state there)
        return env

    def healthy(service: dict[str, Any]) -> bool:
        kind, program, *args = localised(service["healthcheck"]["test"])
        assert kind == "CMD"
        executable = {"python": sys.executable, "hookledger": str(HOOKLEDGER)}[program]
        check = subprocess.run(
            [executable, *args],
            env=environment(service),
            cwd=tmp_path,
            capture_output=True,
            timeout=seconds(service["healthcheck"]["timeout"]) + 30,
        )
        return check.returncode == 0

    init = ours.pop("init")
    done = subprocess.run(
        [str(HOOKLEDGER), *init["command"]], env=environment(init), cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0
    running: dict[str, subprocess.Popen[str]] = {}
    try:
        for name, service in ours.items():
            running[name] = subprocess.Popen(
                [str(HOOKLEDGER), *localised(service["command"])],
                env=environment(service),
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        for name, service in ours.items():
            deadline = time.monotonic() + 90
            while not healthy(service):
                process = running[name]
                assert process.poll() is None, f"{name} exited: {process.communicate()[0]}"
                assert time.monotonic() < deadline, f"{name} never became healthy"
                time.sleep(1)
        for name, service in ours.items():  # `docker compose stop`: the stop signal, then a wait
            process = running[name]
            process.send_signal(getattr(signal, service["stop_signal"]))
            grace = seconds(service.get("stop_grace_period", "10s"))
            out, _ = process.communicate(timeout=grace)
            assert process.returncode in (0, -signal.SIGTERM), f"{name}: {out}"
            assert "Traceback" not in out, f"{name}: {out}"
    finally:
        for process in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def test_the_image_runs_the_package_as_an_unprivileged_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "USER hookledger" in dockerfile and 'ENTRYPOINT ["hookledger"]' in dockerfile
    copied = re.findall(r"^COPY (\S+)", dockerfile, flags=re.MULTILINE)
    # what the package needs to install: its packages and the files pyproject.toml names
    for path in copied:
        assert (ROOT / path).exists(), path
    packages = {"connectors", "reconciler", "dashboard"}
    assert packages <= set(copied)
    # stages: wheels built once with the constraints; a core target without the dashboard's stack;
    # the default (last) stage with it; a health check; no compiler or wheel kept in the runtime
    stages = re.findall(r"^FROM (\S+) AS (\w+)$", dockerfile, flags=re.MULTILINE)
    assert [name for _, name in stages] == ["build", "core", "full"]
    assert "-c constraints.txt" in dockerfile and "HEALTHCHECK" in dockerfile
    core = dockerfile.split(" AS core")[1].split(" AS full")[0]
    assert "'hookledger[postgres]'" in core and "dashboard" not in core.split("HEALTHCHECK")[0]
    assert "COPY --from=build /wheels" not in dockerfile  # mounted, never a layer
