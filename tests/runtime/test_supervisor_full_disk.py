"""A detached run on a disk that fills up: the supervisor never dies of it, the run
ends with ``disk_full``, and status, list, stop and start tell the truth from what is
on disk. The real kind on a small tmpfs where the test may mount one (root); the
supervisor's acts in-process with a store the disk refuses everywhere."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autopilot.config import RunConfig
from autopilot.core.restart import DaemonExit
from autopilot.errors import StateFileError
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.runtime.detach import spawn_supervisor
from autopilot.runtime.liveness import process_alive
from autopilot.runtime.supervision import STOP
from autopilot.runtime.supervisor_acts import SupervisorActs
from autopilot.store.events import read_events
from autopilot.store.run_state import PromptSource, RunState
from autopilot.store.state import StateStore, read_state, read_state_json
from tests.cli.test_control import _wait_for
from tests.conftest import FakeAgent, assert_one_end_per_attempt, run_cli

TIMEOUT = 90.0


class FullDisk(StateStore):
    """A ``state.json`` whose every write the disk refuses (ENOSPC)."""

    def _write(self, state: RunState, **options: Any) -> None:
        raise StateFileError(
            f"cannot write {self.path}: No space left on device", errno=errno.ENOSPC
        )


def _events(folder: Path) -> list[dict[str, Any]]:
    return list(read_events(folder / "events.jsonl"))


def _terminals(folder: Path) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in _events(folder) if e["type"] in ("complete", "abort")]


def _one_end_per_iteration(folder: Path) -> None:
    assert_one_end_per_attempt(_events(folder))


def test_the_supervisor_ends_the_run_when_the_disk_refuses_its_writes(
    repo: Path, fake_agent: FakeAgent, tmp_path: Path
) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    run_id = arm_run(root, RunConfig(), PromptSource(text="work"), repo, SystemClock())
    acts = SupervisorActs(root / run_id, run_id)
    acts.store = FullDisk(acts.store.path)
    # A crash of the daemon: the supervisor would restart it, but cannot record that.
    assert acts.after_exit(DaemonExit(None, signal.SIGKILL)) == STOP
    folder = root / run_id
    assert _terminals(folder) == [("abort", "disk_full")]
    [abort] = [e for e in _events(folder) if e["type"] == "abort"]
    assert "No space left on device" in abort["note"]
    # Its record: the disk refused it; the log's ending is what every command reads.
    assert not read_state(folder / "state.json").terminated
    status = run_cli(["status", run_id], cwd=repo)
    assert "failed (disk_full)" in status.stdout and "relaunch" not in status.stdout
    listed = run_cli(["list"], cwd=repo)
    assert "failed (disk_full)" in listed.stdout and "driver gone" not in listed.stdout
    sent = run_cli(["send", run_id, "hello"], cwd=repo)
    assert sent.returncode == 2 and "already ended (disk_full)" in sent.stderr
    assert "relaunching" not in sent.stdout
    started = run_cli(["start", run_id], cwd=repo)
    assert started.returncode == 1 and "failed (disk_full)" in started.stdout
    assert "relaunching" not in started.stdout
    assert read_state(folder / "state.json").terminated  # repaired once it could be
    stopped = run_cli(["stop", run_id], cwd=repo)
    assert stopped.returncode == 2 and "already ended (disk_full)" in stopped.stderr
    assert _terminals(folder) == [("abort", "disk_full")]


def test_attach_on_a_full_disk_ends_the_run_instead_of_dying(repo: Path, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    run_id = arm_run(root, RunConfig(), PromptSource(text="work"), repo, SystemClock())
    acts = SupervisorActs(root / run_id, run_id)
    acts.store = FullDisk(acts.store.path)
    assert acts.attach(os.getpid()) == 4
    assert _terminals(root / run_id) == [("abort", "disk_full")]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs, mounted for the test (root only), unmounted after it."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def test_a_detached_run_on_a_disk_that_fills_up_ends_with_disk_full(
    small_disk: Path, repo: Path, fake_agent: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    filler = small_disk / "filler"
    fill = f"dd if=/dev/zero of={filler} bs=64k 2>/dev/null; true"
    steps = [
        [{"result": "step one"}],
        [{"shell": fill}, {"result": "step two"}],
        [{"result": "step three"}],
    ]
    for key, value in fake_agent(steps).items():
        monkeypatch.setenv(key, value)
    root = small_disk / "runs"
    monkeypatch.setenv("AUTOPILOT_RUNS_DIR", str(root))
    root.mkdir()
    config = RunConfig(stagnation_limit=0, max_iterations=3)
    run_id = arm_run(root, config, PromptSource(text="work"), repo, SystemClock())
    folder = root / run_id
    spawn_supervisor(root, run_id)
    try:
        _wait_for(lambda: filler.exists() and _supervisor_gone(folder), TIMEOUT)
        # The log's last page took the abort, or nothing more could be written at all:
        # either way no command may call the run something it is not.
        logged = _terminals(folder) == [("abort", "disk_full")]
        status = run_cli(["status", run_id], cwd=repo)
        stopped = run_cli(["stop", run_id], cwd=repo)  # the disk is still full
        if logged:
            assert "failed (disk_full)" in status.stdout
            assert "autopilot start" not in status.stdout  # never offered to relaunch
            assert stopped.returncode == 2 and "already ended (disk_full)" in stopped.stderr
            assert "no run to relaunch" in run_cli(["relaunch"], cwd=repo).stdout
        else:
            assert "driver     gone" in status.stdout and "supervisor gone" in status.stdout
            assert stopped.returncode == 4 and "No space left on device" in stopped.stderr
        filler.unlink()
        started = run_cli(["start", run_id], cwd=repo)
        if logged:
            assert started.returncode == 1 and "relaunching" not in started.stdout
            assert read_state(folder / "state.json").termination_reason == "disk_full"
            assert _terminals(folder) == [("abort", "disk_full")]
        else:  # the run goes on from what its files hold
            # A fast agent may use up the budget before `start` sees the daemon attach;
            # then `start` says how it ended, with that exit code.
            ended_at_once = "budget reached (max_iterations)" in started.stdout
            assert started.returncode == (3 if ended_at_once else 0), started.stderr
            _wait_for(lambda: _supervisor_gone(folder), TIMEOUT)
            assert _terminals(folder) == [("abort", "max_iterations")]
        _one_end_per_iteration(folder)
    finally:
        _kill_left(folder)


def _supervisor_gone(folder: Path) -> bool:
    with contextlib.suppress(StateFileError):
        state = read_state_json(folder / "state.json")
        return not process_alive(state.get("supervisorPid"), state.get("supervisorStartTime"))
    return False


def _kill_left(folder: Path) -> None:
    with contextlib.suppress(StateFileError):
        state = read_state_json(folder / "state.json")
        for key, started in (("supervisorPid", "supervisorStartTime"), ("pid", "pidStartTime")):
            if process_alive(state.get(key), state.get(started)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(state[key]), signal.SIGKILL)


def test_start_on_a_full_disk_says_so_and_leaves_the_run_as_it_was(
    small_disk: Path, repo: Path, fake_agent: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in fake_agent([[{"result": "COMPLETE"}]]).items():
        monkeypatch.setenv(key, value)
    root = small_disk / "runs"
    monkeypatch.setenv("AUTOPILOT_RUNS_DIR", str(root))
    root.mkdir()
    run_id = arm_run(root, RunConfig(), PromptSource(text="work"), repo, SystemClock())
    folder = root / run_id
    filler = small_disk / "filler"
    subprocess.run(
        ["sh", "-c", f"dd if=/dev/zero of={filler} bs=64k 2>/dev/null; true"], check=True
    )
    try:
        started = run_cli(["start", run_id], cwd=repo)
        assert started.returncode == 4, (started.stdout, started.stderr)
        [line] = started.stderr.strip().splitlines()
        assert f"the disk holding {folder} is full" in line
        assert "goes on in the background" not in started.stdout
        assert not read_state(folder / "state.json").terminated
        assert read_state(folder / "state.json").supervisor_pid is None
        filler.unlink()
        again = run_cli(["start", run_id], cwd=repo)
        assert again.returncode == 0, again.stderr
        _wait_for(lambda: _supervisor_gone(folder), TIMEOUT)
        assert _terminals(folder) == [("complete", "completion_promise")]
    finally:
        _kill_left(folder)
