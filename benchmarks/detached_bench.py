"""Detached runs at scale: N runs detached at once, each under its own supervisor.

Run ``python benchmarks/detached_bench.py`` (50 runs, a few minutes on a 2-core
machine) or ``--runs 10`` for a smoke run. Each run has a repository of its own (one
active run per repository) and the project's scripted fake agent: iteration 1 waits
until the benchmark releases it, iteration 2 completes. While every agent waits, the
benchmark measures each supervisor's and daemon's resident memory (RSS) and the CPU
they use over an idle window, as a percentage of one core; a bare ``python -c
'import time; time.sleep(…)'`` measured the same way is the baseline. Then it
releases the agents, waits for every run to end, and checks each log: one terminal
event, ``complete``, and an ``iteration_end`` for every ``iteration_start``.

Aims (issue of the detached runs): supervisor RSS ≤ 15 MB, daemon idle CPU < 0.5 % of a
core. Writes only inside one temp directory, removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
MB = 1000 * 1000


def _git_repo(path: Path) -> None:
    path.mkdir(parents=True)
    for args in (
        ["init", "-q"],
        [
            "-c",
            "user.email=b@localhost",
            "-c",
            "user.name=b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)


def _state(folder: Path) -> dict[str, Any]:
    try:
        loaded: dict[str, Any] = json.loads((folder / "state.json").read_text())
    except (OSError, ValueError):
        return {}
    return loaded


def _wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    raise SystemExit(f"timed out waiting for {what}")


def _sample(pids: list[int], window_seconds: float) -> tuple[list[float], list[float]]:
    """RSS (MB) now and CPU over ``window_seconds`` (% of one core), per pid."""
    processes = [psutil.Process(pid) for pid in pids]
    before = [sum(p.cpu_times()[:2]) for p in processes]
    time.sleep(window_seconds)
    after = [sum(p.cpu_times()[:2]) for p in processes]
    rss = [p.memory_info().rss / MB for p in processes]
    cpu = [100 * (b - a) / window_seconds for a, b in zip(before, after, strict=True)]
    return rss, cpu


def _row(name: str, values: list[float], unit: str, baseline: float | None = None) -> str:
    median, top = statistics.median(values), max(values)
    ratio = f"{median / baseline:6.2f}x" if baseline else "       "
    return f"{name:<28} median {median:8.2f} {unit:<4} max {top:8.2f} {unit:<4} {ratio}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--idle-window", type=float, default=20.0, help="seconds measured idle")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="autopilot-detached-bench-"))
    runs_root = work / "runs"
    script = work / "script.json"
    script.write_text(
        json.dumps(
            {
                "iterations": [
                    {
                        "steps": [
                            {"shell": "while [ ! -f go ]; do sleep 0.5; done"},
                            {"result": "waited"},
                        ]
                    },
                    {"steps": [{"result": "COMPLETE"}]},
                ]
            }
        )
    )
    launcher = work / "fake-claude"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m autopilot.testkit.fake_agent "$@"\n')
    launcher.chmod(0o755)
    env = dict(
        os.environ,
        AUTOPILOT_RUNS_DIR=str(runs_root),
        AUTOPILOT_CLAUDE_BIN=str(launcher),
        FAKE_AGENT_SCRIPT=str(script),
        PYTHONPATH=str(REPO / "src"),
    )
    repos = [work / f"p{n:03d}" for n in range(args.runs)]
    baseline = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    try:
        for repo in repos:
            _git_repo(repo)
        started = time.monotonic()

        def detach(repo: Path) -> None:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "autopilot",
                    "run",
                    "--detach",
                    "-p",
                    "work",
                    "--max-iterations",
                    "3",
                    "--stagnation-limit",
                    "0",
                ],
                cwd=repo,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"run --detach failed in {repo}: {done.stderr}")

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(detach, repos))
        detach_seconds = time.monotonic() - started
        folders = sorted(
            p for p in runs_root.iterdir() if p.is_dir() and not p.name.startswith(".")
        )
        assert len(folders) == args.runs, (len(folders), args.runs)
        _wait(
            lambda: all(isinstance(_state(f).get("agentPid"), int) for f in folders),
            600,
            "every agent to be waiting",
        )
        states = [_state(f) for f in folders]
        supervisors = [int(s["supervisorPid"]) for s in states]
        daemons = [int(s["pid"]) for s in states]
        sup_rss, sup_cpu = _sample(supervisors, args.idle_window)
        dae_rss, dae_cpu = _sample(daemons, args.idle_window)
        (base_rss,), (base_cpu,) = _sample([baseline.pid], args.idle_window / 4)
        for repo in repos:
            (repo / "go").write_text("")
        _wait(
            # The supervisor forgets itself once its daemon has exited, after the end.
            lambda: all(
                _state(f).get("terminated") and not _state(f).get("supervisorPid") for f in folders
            ),
            900,
            "every run to end",
        )
        total_seconds = time.monotonic() - started
        bad = []
        for folder in folders:
            events = [
                json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()
            ]
            types = [e["type"] for e in events]
            terminals = [t for t in types if t in ("complete", "abort")]
            if terminals != ["complete"] or types.count("iteration_start") != types.count(
                "iteration_end"
            ):
                bad.append(folder.name)
        print(
            f"autopilot detached benchmark: {args.runs} runs, {os.cpu_count()} cores, "
            f"python {sys.version.split()[0]}"
        )
        print(f"detaching all: {detach_seconds:.1f} s; all finished after {total_seconds:.1f} s")
        print(_row("supervisor RSS", sup_rss, "MB", base_rss))
        print(_row("daemon RSS", dae_rss, "MB", base_rss))
        print(_row("supervisor idle CPU", sup_cpu, "%"))
        print(_row("daemon idle CPU", dae_cpu, "%"))
        print(f"{'baseline (bare python) RSS':<28} {base_rss:8.2f} MB, idle CPU {base_cpu:.2f} %")
        print(
            f"runs ended complete with every iteration closed: {args.runs - len(bad)}/{args.runs}"
            + (f" (bad: {', '.join(bad)})" if bad else "")
        )
        return 1 if bad else 0
    finally:
        baseline.kill()
        baseline.wait()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
