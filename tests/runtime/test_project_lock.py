"""The project lock's rivals: a run active in the same work tree refuses a new one; a
run whose ``state.json`` says it ended never does, whatever its driver record."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import psutil
import pytest

from autopilot.errors import ProjectBusyError
from autopilot.runtime.locks import ProjectLock
from tests.manage.runs import make_run, now_ms


def test_a_run_whose_state_says_it_ended_is_no_rival_however_alive_its_driver(
    tmp_path: Path,
) -> None:
    project, runs = tmp_path / "project", tmp_path / "runs"
    project.mkdir()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        driver = {
            "pid": sleeper.pid,
            "pidStartTime": psutil.Process(sleeper.pid).create_time(),
            "host": socket.gethostname(),
            "cwd": str(project),
        }
        run_id = make_run(runs, "project", now_ms(), state=driver)
        lock = ProjectLock(runs, project)
        with pytest.raises(ProjectBusyError, match=run_id):
            lock.acquire(run_id="new-run")
        state_file = runs / run_id / "state.json"
        state = json.loads(state_file.read_text())
        state["terminated"] = True
        state_file.write_text(json.dumps(state))
        lock.acquire(run_id="new-run")
        lock.release()
    finally:
        sleeper.kill()
        sleeper.wait()
