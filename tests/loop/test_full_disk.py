"""A disk that fills up under a run, in-process (a store whose writes the disk
refuses, a log whose step was cut short): the run ends with ``disk_full``, every
command reads the truth from what is on disk, and no iteration is told or charged
twice."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from autopilot import control
from autopilot.config import RunConfig
from autopilot.errors import BacklogWriteError, StateFileError, UsageError
from autopilot.store import backlog as backlog_store
from autopilot.store.events import read_events
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore, read_state
from tests.conftest import assert_one_end_per_attempt
from tests.fakes import NO_SUCH_PID, Rig, SimulatedCrash, arm, crash_once_logged
from tests.loop.test_driver import working
from tests.loop.test_driver_backlog import agent, arm_backlog


class FullDiskStore(StateStore):
    """A ``state.json`` the disk refuses to write (ENOSPC) from the first write
    ``fills_up`` picks on: the disk stays full."""

    def __init__(self, path: Path, fills_up: Callable[[RunState], bool]) -> None:
        super().__init__(path)
        self.fills_up = fills_up
        self.full = False

    def update(self, change: Callable[[RunState], None], **kwargs: Any) -> RunState:
        """``StateStore.update``, or the disk's refusal of the write."""

        def checked(state: RunState) -> None:
            change(state)
            self.full = self.full or self.fills_up(state)
            if self.full:
                _refuse(self, state)

        return super().update(checked, **kwargs)


def _refuse(self: StateStore, state: RunState, **options: Any) -> None:
    raise StateFileError(f"cannot write {self.path}: No space left on device", errno=errno.ENOSPC)


def _events(rig: Rig) -> list[dict[str, Any]]:
    return list(read_events(rig.folder / "events.jsonl"))  # a torn line is skipped


def _of(rig: Rig, kind: str) -> list[dict[str, Any]]:
    return [e for e in _events(rig) if e["type"] == kind]


def _terminal(rig: Rig) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in _events(rig) if e["type"] in ("complete", "abort")]


def one_end_per_iteration(rig: Rig) -> None:
    """No attempt recorded twice (``assert_one_end_per_attempt``)."""
    assert_one_end_per_attempt(_events(rig))


def _driver_gone(rig: Rig) -> None:
    """The driver ran in this test's process: as far as the run knows, it died."""
    path = rig.folder / "state.json"
    path.write_text(path.read_text().replace(f'"pid": {os.getpid()},', f'"pid": {NO_SUCH_PID},'))


def test_a_full_disk_ends_the_run_with_disk_full_and_status_says_so(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=5))
    store = FullDiskStore(rig.folder / "state.json", lambda s: s.spend.iterations >= 2)
    driver, _ = rig.driver([working(rig), working(rig)], store=store)
    with pytest.raises(StateFileError):
        driver.run()
    assert _terminal(rig) == [("abort", "disk_full")]
    assert "No space left on device" in _of(rig, "abort")[0]["note"]
    on_disk = read_state(rig.folder / "state.json")
    assert not on_disk.terminated  # the disk refused that write
    _driver_gone(rig)
    # The log's terminal event wins over the stale "running".
    report = control.status(rig.folder)
    assert report.state.terminated and report.state.termination_reason == "disk_full"
    assert report.state.status.value == "error"
    with pytest.raises(UsageError, match=r"already ended \(disk_full\)"):
        control.stop(rig.folder, rig.clock)
    assert _terminal(rig) == [("abort", "disk_full")]
    assert read_state(rig.folder / "state.json").terminated  # repaired once it could be
    one_end_per_iteration(rig)


def test_status_folds_the_ending_while_state_json_still_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=5))
    store = FullDiskStore(rig.folder / "state.json", lambda s: s.spend.iterations >= 1)
    driver, _ = rig.driver([working(rig)], store=store)
    with pytest.raises(StateFileError):
        driver.run()
    _driver_gone(rig)
    # Still full: stop and repair cannot write state.json, and say the run ended.
    monkeypatch.setattr(StateStore, "_write", _refuse)
    with pytest.raises(UsageError, match=r"already ended \(disk_full\)"):
        control.stop(rig.folder, rig.clock)
    assert control.repair(rig.folder, rig.clock).termination_reason == "disk_full"
    assert not read_state(rig.folder / "state.json").terminated
    assert _terminal(rig) == [("abort", "disk_full")]


def _tear_last_decision(rig: Rig) -> None:
    """Cut the log inside its last ``decision_applied`` line, as a disk that filled up
    mid-write (and a writer that could not take the part back) leaves it."""
    log = rig.folder / "events.jsonl"
    data = log.read_bytes()
    at = data.rindex(b'{"type":"decision_applied"')
    log.write_bytes(data[: at + 40] + b"\n")


@pytest.mark.parametrize("how", ["stop", "relaunch"])
def test_a_step_torn_on_the_log_is_told_and_charged_once(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3))
    # The second step reaches the log; its state write never happens.
    crash_once_logged(monkeypatch, 2)
    driver, _ = rig.driver([working(rig), working(rig)])
    with pytest.raises(SimulatedCrash):
        driver.run()
    _tear_last_decision(rig)
    _driver_gone(rig)
    if how == "stop":
        control.stop(rig.folder, rig.clock, reason="enough")
        expected = 2
    else:
        relaunched, runner = rig.driver([working(rig)])
        assert relaunched.run().reason == "max_iterations"
        assert len(runner.requests) == 1  # the torn iteration counted: one more is left
        expected = 3
    one_end_per_iteration(rig)
    state = read_state(rig.folder / "state.json")
    charged = [e["iterationCostUsd"] for e in _of(rig, "iteration_end")]
    assert state.spend.iterations == len(charged) == expected
    assert state.spend.cost_usd == pytest.approx(sum(charged))
    assert len([e for e in _events(rig) if e["type"] in ("complete", "abort")]) == 1


class _FullBacklogDisk:
    """The disk under ``tasks.jsonl``: it refuses every write (ENOSPC) once ``full``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = False
        real = backlog_store.write_atomically

        def write(path: Path, data: bytes, **options: Any) -> None:
            if self.full:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
            real(path, data, **options)

        monkeypatch.setattr(backlog_store, "write_atomically", write)


def test_a_full_disk_under_tasks_jsonl_ends_a_backlog_run_with_disk_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = arm_backlog(tmp_path, max_iterations=5)
    tasks = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"
    before = tasks.read_bytes()
    _FullBacklogDisk(monkeypatch).full = True
    driver, runner = rig.driver([agent(rig, lambda *_: ("continue_next", {"ac1": True}, ()))])
    with pytest.raises(BacklogWriteError) as raised:
        driver.run()
    assert raised.value.exit_code == 4  # the command line's environment error
    assert str(raised.value) == f"cannot write {tasks}: No space left on device"
    assert _terminal(rig) == [("abort", "disk_full")]
    assert _of(rig, "abort")[0]["note"] == (
        f"the run's files cannot be written: cannot write {tasks}: No space left on device"
    )
    assert runner.requests == []  # no agent started on an item autopilot could not record
    assert tasks.read_bytes() == before
    assert read_state(rig.folder / "state.json").termination_reason == "disk_full"


def test_a_disk_that_fills_during_a_backlog_iteration_ends_the_run_at_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = arm_backlog(tmp_path, max_iterations=5)
    tasks = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"
    disk = _FullBacklogDisk(monkeypatch)

    def fill_up(item: str, attempt: int, cwd: Path) -> Any:
        (cwd / "alpha.txt").write_text("alpha\n")
        disk.full = True
        return "continue_next", {"ac1": True}, ("wrote alpha.txt",)

    driver, runner = rig.driver([agent(rig, fill_up)])
    with pytest.raises(BacklogWriteError):
        driver.run()
    assert len(runner.requests) == 1
    assert _terminal(rig) == [("abort", "disk_full")]
    # What the file could not take is in the run's log: alpha's end, with its evidence.
    ends = [(e["itemId"], e["status"]) for e in _of(rig, "workitem_end")]
    assert ends == [("alpha", "completed")]
    warned = [e["note"] for e in _of(rig, "warning") if "cannot write" in e["note"]]
    assert warned and "No space left on device" in warned[0]
    on_disk = [json.loads(line) for line in tasks.read_text().splitlines()]
    assert [(i["id"], i.get("status", "ready")) for i in on_disk] == [
        ("alpha", "running"),
        ("beta", "ready"),
        ("gamma", "ready"),
    ]


def test_a_disk_that_fills_on_the_last_item_never_ends_the_run_backlog_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.loop.test_driver_backlog import ITEMS

    rig = arm_backlog(tmp_path, items=ITEMS[:1], max_iterations=5)
    tasks = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"
    disk = _FullBacklogDisk(monkeypatch)

    def fill_up(item: str, attempt: int, cwd: Path) -> Any:
        (cwd / "alpha.txt").write_text("alpha\n")
        disk.full = True
        return "continue_next", {"ac1": True}, ("wrote alpha.txt",)

    driver, runner = rig.driver([agent(rig, fill_up)])
    with pytest.raises(BacklogWriteError):
        driver.run()
    assert len(runner.requests) == 1
    # The file still says alpha is running: the run never read "done" from it.
    assert _terminal(rig) == [("abort", "disk_full")]
    assert "No space left on device" in _of(rig, "abort")[0]["note"]
    assert [json.loads(line)["status"] for line in tasks.read_text().splitlines()] == ["running"]
    # The run's log keeps alpha completed: the stale file is not taken as a person's edit.
    recorded = [e["item"]["status"] for e in _of(rig, "workitem_recorded")]
    assert recorded[-1] == "completed"
