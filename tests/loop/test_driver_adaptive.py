"""A ``--self-improve`` run's adaptive iteration budget through the real driver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autopilot.config import RunConfig
from autopilot.loop.arming import PromptSource, arm_run
from autopilot.store.state import read_state
from autopilot.workspace.marks import TreeMark
from tests.conftest import read_jsonl
from tests.fakes import FakeClock, FakeWorkspace, Rig, Scripted, claude_lines


class CleanWorkspace(FakeWorkspace):
    """A work tree with nothing uncommitted, ever."""

    def mark(self) -> TreeMark:
        return TreeMark(self.head, {})


def _arm(tmp_path: Path, mode: str, workspace: FakeWorkspace) -> Rig:
    root = tmp_path / "runs"
    root.mkdir()
    (tmp_path / "work").mkdir()
    clock = FakeClock()
    config = RunConfig(max_iterations=2, adaptive_extension=2, adaptive_max_total=5)
    run_id = arm_run(
        root, config, PromptSource(text="improve"), tmp_path / "work", clock, mode=mode
    )
    return Rig(root, run_id, clock, workspace)


def _events(rig: Rig, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(rig.folder / "events.jsonl") if e["type"] == kind]


def _working(rig: Rig) -> Scripted:
    return Scripted(claude_lines("improved one thing"), on_start=lambda _: rig.workspace.edit())


def test_work_in_flight_extends_the_budget_up_to_the_total(tmp_path: Path) -> None:
    rig = _arm(tmp_path, "self-improve", FakeWorkspace())
    driver, runner = rig.driver([_working(rig)])
    result = driver.run()
    assert (result.terminal_type, result.reason) == ("abort", "max_iterations")
    assert len(runner.requests) == 5
    extended = _events(rig, "budget_extended")
    assert [(e["iteration"], e["maxIterations"]) for e in extended] == [(2, 4), (4, 5)]
    assert "uncommitted changes" in extended[0]["note"]
    state = read_state(rig.folder / "state.json")
    assert (state.max_iterations, state.config.max_iterations, state.spend.iterations) == (5, 5, 5)


def test_every_signal_negative_keeps_the_users_ceiling(tmp_path: Path) -> None:
    rig = _arm(tmp_path, "self-improve", CleanWorkspace())
    driver, runner = rig.driver([Scripted(claude_lines("nothing to do"))])
    result = driver.run()
    assert result.reason == "max_iterations" and len(runner.requests) == 2
    assert _events(rig, "budget_extended") == []


def test_a_prompt_run_never_extends(tmp_path: Path) -> None:
    rig = _arm(tmp_path, "prompt", FakeWorkspace())
    driver, runner = rig.driver([_working(rig)])
    assert driver.run().reason == "max_iterations" and len(runner.requests) == 2
    assert _events(rig, "budget_extended") == []
