"""``autopilot watch`` in a real terminal (tmux) beside a real run: p pauses, q leaves,
and the run goes on to complete."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autopilot.runtime.liveness import driver_alive
from autopilot.store.run_state import decode_state
from tests.conftest import FakeAgent, run_cli

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

STEP = [{"shell": "date +%N >> progress.txt"}, {"text": "working on it"}, {"sleep": 1.0}]


def _wait_for(check: Callable[[], bool], what: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _state(folder: Path) -> dict[str, Any]:
    try:
        value: dict[str, Any] = json.loads((folder / "state.json").read_text())
    except (OSError, ValueError):
        return {}
    return value


@pytest.fixture
def tmux() -> Iterator[Callable[..., str]]:
    """A private tmux server; calls ``tmux -L <name> ARGS`` and returns stdout."""
    name = f"autopilot-test-{uuid.uuid4().hex[:8]}"

    def call(*args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", name, *args], capture_output=True, text=True, check=False, timeout=30
        )
        return done.stdout

    yield call
    call("kill-server")


def test_watch_pauses_and_leaves_a_live_run(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, tmux: Callable[..., str]
) -> None:
    """Attach to a running run, press p (state.json says paused), q (the view exits and
    the driver goes on); resumed, the run completes."""
    script = [[*STEP, {"result": f"step {n} done"}] for n in (1, 2)]
    script.append([*STEP, {"result": "all done <promise>COMPLETE</promise>"}])
    env = dict(os.environ, **fake_agent(script))
    runs = tmp_path / "runs"
    run = subprocess.Popen(
        [sys.executable, "-m", "autopilot", "run", "-p", "work", "--max-iterations", "6"],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(lambda: runs.exists() and any(runs.glob("repo-*/state.json")), "the run")
        folder = next(runs.glob("repo-*"))
        _wait_for(lambda: bool(_state(folder).get("pid")), "the driver to attach")
        command = " ".join(
            [
                "env",
                shlex.quote(f"AUTOPILOT_RUNS_DIR={runs}"),
                shlex.quote(sys.executable),
                "-m autopilot watch",
                folder.name,
                "; echo WATCH-EXITED-$?; sleep 120",
            ]
        )
        tmux("new-session", "-d", "-x", "120", "-y", "40", command)

        def screen() -> str:
            return tmux("capture-pane", "-p")

        _wait_for(lambda: folder.name in screen() and "Pause" in screen(), "the live view")
        tmux("send-keys", "p")
        _wait_for(lambda: _state(folder).get("paused") is True, '"paused": true in state.json')
        _wait_for(lambda: "PAUS" in screen(), "the badge to say so")
        tmux("send-keys", "q")
        _wait_for(lambda: "WATCH-EXITED-0" in screen(), "the view to exit")
        state = _state(folder)
        assert run.poll() is None, "leaving the view must not stop the run"
        assert driver_alive(decode_state(state)) is True and not state.get("terminated")
        resumed = run_cli(["resume", folder.name], cwd=repo, env={"AUTOPILOT_RUNS_DIR": str(runs)})
        assert resumed.returncode == 0, resumed.stderr
        assert run.wait(timeout=90) == 0
        final = _state(folder)
        assert final["terminated"] is True and final["terminationReason"] == "completion_promise"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
