"""How long the ``hookledger`` command takes to start: whole processes, as a user pays for them.

Each arm is one command line, run to its exit; its wall time, its CPU time (user + system, the
operating system's accounting of the finished child, ``os.wait4``) and its peak memory are read.
Arms are interleaved round by round; medians (range) and the ratio to the floor, a bare
``python -c pass`` of the same interpreter, measured in the same run. ``--hookrecon PATH`` adds
another tool's CLI (``hookrecon --help``: it has no --version) as a yardstick.

    python bench/startup.py --rounds 15 [--hookrecon /path/to/venv/bin/hookrecon]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import median

HOOKLEDGER = str(Path(sys.executable).with_name("hookledger"))
GOAL = 0.15  # seconds of wall time for --version, --help and serve --help (issue 37)


def run_once(argv: list[str]) -> tuple[float, float]:
    """(wall s, cpu s) of one whole process. (Its peak memory is not read here: a child's
    ``ru_maxrss`` counts the parent's pages it had before ``exec``.)"""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = 0  # (reaped by wait4)
    return wall, usage.ru_utime + usage.ru_stime


def spread(values: list[float], unit: str = "s") -> str:
    return f"{median(values):.3f} {unit} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--hookrecon", help="another tool's executable, as a yardstick")
    args = parser.parse_args()
    arms: dict[str, list[str]] = {
        "python -c pass (the floor)": [sys.executable, "-c", "pass"],
        "hookledger --version": [HOOKLEDGER, "--version"],
        "hookledger --help": [HOOKLEDGER, "--help"],
        "hookledger serve --help": [HOOKLEDGER, "serve", "--help"],
    }
    if args.hookrecon:
        arms["hookrecon --help"] = [args.hookrecon, "--help"]
    for argv in arms.values():  # a warm-up each: the file system's cache, not the figures
        run_once(argv)
    walls: dict[str, list[float]] = {name: [] for name in arms}
    cpus: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(args.rounds):
        for name, argv in arms.items():  # interleaved: the machine's drift spreads over all arms
            wall, cpu = run_once(argv)
            walls[name].append(wall)
            cpus[name].append(cpu)
    floor_wall = median(walls["python -c pass (the floor)"])
    floor_cpu = median(cpus["python -c pass (the floor)"])
    print("| command | wall, median (range) | cpu (user+sys) | wall / floor | cpu / floor | goal |")
    print("|---|---:|---:|---:|---:|---|")
    for name in arms:
        goal = f"≤ {GOAL:g} s" if name.startswith("hookledger") else ""
        print(
            f"| `{name}` | {spread(walls[name])} | {spread(cpus[name])} | "
            f"{median(walls[name]) / floor_wall:.1f}x | "
            f"{median(cpus[name]) / max(floor_cpu, 1e-3):.1f}x | {goal} |"
        )


if __name__ == "__main__":
    main()
