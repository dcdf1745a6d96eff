"""A step that only goes on is written with the opening of the next attempt: one
``state.json`` write per iteration of a plain run (``RunRecord.apply``, ``hold``)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from autopilot.config import RunConfig
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore, read_state
from tests.fakes import arm
from tests.loop.test_driver import _of, working


class CountingStore(StateStore):
    """``state.json``, counting its writes and recording what each one held."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.written: list[tuple[int, bool]] = []  # (iterations spent, attempt open)

    def update(self, change: Any, **kwargs: Any) -> RunState:
        state = super().update(change, **kwargs)
        self.written.append((state.spend.iterations, state.iteration_open))
        return state


def _writes(tmp_path: Path, iterations: int) -> list[tuple[int, bool]]:
    rig = arm(tmp_path / str(iterations), RunConfig(max_iterations=iterations))
    store = CountingStore(rig.folder / "state.json")
    driver, _ = rig.driver([working(rig)], store=store)
    assert driver.run().reason == "max_iterations"
    state = read_state(rig.folder / "state.json")
    assert (state.spend.iterations, state.iteration_open) == (iterations, False)
    assert len(_of(rig, "decision_applied")) == iterations
    return store.written


def test_an_iteration_that_goes_on_writes_the_state_once(tmp_path: Path) -> None:
    (tmp_path / "3").mkdir()
    (tmp_path / "6").mkdir()
    three, six = _writes(tmp_path, 3), _writes(tmp_path, 6)
    assert len(six) - len(three) == 3
    # Each step before the last reaches state.json in the write that opens the next.
    opened = [spent for spent, open_ in six if open_]
    assert opened == [0, 1, 2, 3, 4, 5]


def test_the_held_steps_log_is_synced_before_the_state_that_takes_it_is_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=4))
    log, state = rig.folder / "events.jsonl", rig.folder / "state.json"
    # "step" (a step's events appended), "synced" (the log) and "took" (a state.json
    # that opens an attempt after a spent one renamed into place), in order.
    seen: list[str] = []
    real_write, real_fsync, real_replace = os.write, os.fsync, os.replace

    def is_log(fd: int) -> bool:
        try:
            return os.path.samestat(os.fstat(fd), os.stat(log))
        except OSError:
            return False

    def write(fd: int, data: bytes) -> int:
        if b'"decision_applied"' in data and is_log(fd):
            seen.append("step")
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        real_fsync(fd)
        if is_log(fd):
            time.sleep(0.05)  # a slow disk: a rename that does not wait comes first
            seen.append("synced")

    def replace(src: Any, dst: Any) -> None:
        real_replace(src, dst)
        if Path(dst) == state:
            written = read_state(state)
            if written.iteration_open and written.spend.iterations:
                seen.append("took")

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    driver, _ = rig.driver([working(rig)])
    assert driver.run().reason == "max_iterations"
    assert seen.count("took") == 3, seen
    unsynced = False
    for what in seen:
        unsynced = (unsynced or what == "step") and what != "synced"
        assert not (what == "took" and unsynced), seen
