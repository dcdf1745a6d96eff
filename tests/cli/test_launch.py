"""Launching runs in the background at once: of several ``start`` or ``run --detach``
in one work tree exactly one starts a daemon; the others are refused in one line with
exit 4 and leave no run folder and no supervisor behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autopilot.config import RunConfig
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.runtime.liveness import process_alive
from autopilot.store.paths import list_run_ids, runs_root
from autopilot.store.run_state import PromptSource
from autopilot.store.state import read_state_json
from tests.conftest import FakeAgent

WAITING_AGENT = [[{"shell": "while [ ! -f go ]; do sleep 0.05; done"}, {"result": "COMPLETE"}]]


def _processes(module: str, run_id: str) -> list[int]:
    """The live processes running ``python -m <module> ... <run_id>``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if module.encode() in argv and run_id.encode() in argv:
                stat = (entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()
                if stat[0] != b"Z":
                    found.append(int(entry.name))
    return found


def _at_once(commands: list[list[str]], cwd: Path) -> list[subprocess.CompletedProcess[str]]:
    """Run each ``autopilot`` command line at the same time; their results in order."""
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "autopilot", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in commands
    ]
    done = []
    for process, args in zip(started, commands, strict=True):
        out, err = process.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(args, process.returncode, out, err))
    return done


@pytest.fixture
def agent(fake_agent: FakeAgent, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A scripted agent that waits for a file; whatever the test started is killed."""
    for key, value in fake_agent(WAITING_AGENT).items():
        monkeypatch.setenv(key, value)
    yield
    root = runs_root()
    for run_id in list_run_ids(root):
        with contextlib.suppress(Exception):
            for pid in _processes("autopilot.runtime.supervisor", run_id):
                os.kill(pid, signal.SIGKILL)
            state = read_state_json(root / run_id / "state.json")
            if process_alive(state.get("pid"), state.get("pidStartTime")):
                os.kill(int(state["pid"]), signal.SIGKILL)


def _arm(repo: Path) -> str:
    config = RunConfig(stagnation_limit=0)
    return arm_run(runs_root(), config, PromptSource(text="work"), repo, SystemClock())


def _one_started(results: list[subprocess.CompletedProcess[str]]) -> None:
    codes = sorted(r.returncode for r in results)
    assert codes == [0] + [4] * (len(results) - 1), [(r.returncode, r.stderr) for r in results]
    for refused in (r for r in results if r.returncode == 4):
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "Traceback" not in refused.stderr
        assert "goes on in the background" not in refused.stdout


def test_several_starts_of_one_run_at_once_start_it_once(agent: Any, repo: Path) -> None:
    run_id = _arm(repo)
    results = _at_once([["start", run_id]] * 3, repo)
    _one_started(results)
    assert len(_processes("autopilot.runtime.supervisor", run_id)) == 1
    assert len(_processes("autopilot.runtime.daemon", run_id)) == 1
    # Once it runs, a later start is refused the same way.
    again = _at_once([["start", run_id]], repo)[0]
    assert again.returncode == 4 and "already running" in again.stderr


def test_starts_of_two_runs_of_one_project_at_once_start_one(agent: Any, repo: Path) -> None:
    first, second = _arm(repo), _arm(repo)
    results = _at_once([["start", first], ["start", second]], repo)
    _one_started(results)
    supervised = [r for r in (first, second) if _processes("autopilot.runtime.supervisor", r)]
    assert len(supervised) == 1


def test_several_detached_runs_at_once_make_one_run(agent: Any, repo: Path) -> None:
    results = _at_once([["run", "--detach", "-p", "work"]] * 3, repo)
    _one_started(results)
    [run_id] = list_run_ids(runs_root())  # the refused ones left no folder
    assert len(_processes("autopilot.runtime.supervisor", run_id)) == 1
