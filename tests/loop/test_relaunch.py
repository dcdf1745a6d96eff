"""The attempt a crash cut short, as a relaunched driver finds it (``loop.relaunch``),
in-process (fake runner and clock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autopilot.config import RunConfig
from autopilot.core.vocabulary import EndedBy
from autopilot.loop.driver import Driver
from autopilot.loop.relaunch import Crashed, crashed_attempt
from autopilot.store.state import read_state
from tests.fakes import Rig, Scripted, SimulatedCrash, arm, claude_lines
from tests.loop.test_driver import _of


def _found(rig: Rig, driver: Driver) -> Crashed:
    p = driver.parts
    return crashed_attempt(
        p.record, p.run_dir, p.adapter, p.workspace, p.backlog, p.cwd, rig.clock.now_ms()
    )


def test_a_run_no_driver_left_open_has_no_crashed_attempt(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    driver, _ = rig.driver([])
    assert _found(rig, driver) == Crashed(None, frozenset())
    assert _of(rig, "warning") == []


def test_the_attempt_a_crash_left_open_is_found_not_applied(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3))
    lost = Scripted(claude_lines("half way", cost_usd=0.5), crash=True)
    driver, _ = rig.driver([lost])
    with pytest.raises(SimulatedCrash):
        driver.run()
    relaunched, _ = rig.driver([])
    found = _found(rig, relaunched)
    assert found.torn == frozenset()
    attempt = found.attempt
    assert attempt is not None
    assert (attempt.number, attempt.ended_by, attempt.cost_usd) == (1, EndedBy.DRIVER_DIED, 0.5)
    # The driver concludes and applies it; finding it leaves the attempt open.
    assert read_state(rig.folder / "state.json").iteration_open
    assert _of(rig, "iteration_end") == []
