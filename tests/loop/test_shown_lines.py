"""The plain view's lines (``RunRecord``'s ``on_events``): every event, in the log's
order; those of a step that goes on are shown once the next agent has started, so
formatting and writing them is not between two agents."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from autopilot.agents.claude import ClaudeAdapter
from autopilot.config import RunConfig
from autopilot.loop.driver import Driver
from autopilot.loop.process import ProcessResult
from autopilot.loop.runner import AgentWatch, RunRequest
from tests.conftest import read_jsonl
from tests.fakes import FakeRunner, NoLocks, Rig, Scripted, arm, claude_lines


class _Watching(FakeRunner):
    """Records what was shown when each agent is about to start."""

    def __init__(self, rig: Rig, attempts: list[Scripted], shown: list[str]) -> None:
        super().__init__(rig.clock, attempts)
        self.shown = shown
        self.before_start: list[list[str]] = []

    def run(self, request: RunRequest, watch: AgentWatch) -> ProcessResult:
        self.before_start.append(list(self.shown))
        return super().run(request, watch)


def _drive(rig: Rig, attempts: list[Scripted]) -> tuple[list[str], _Watching]:
    shown: list[str] = []
    runner = _Watching(rig, attempts, shown)

    def on_events(events: list[dict[str, Any]]) -> None:
        shown.extend(event["type"] for event in events)

    driver = Driver(
        rig.root,
        rig.run_id,
        ClaudeAdapter(sys.executable),
        rig.clock,
        rig.interrupts,
        locks=NoLocks(),
        base_env={"PATH": "/usr/bin"},
        runner=runner,
        workspace=rig.workspace,
        on_events=on_events,
    )
    driver.run()
    return shown, runner


def _log(rig: Rig) -> list[str]:
    return [e["type"] for e in read_jsonl(rig.root / rig.run_id / "events.jsonl")][1:]


def test_every_line_is_shown_in_the_logs_order(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3))
    shown, runner = _drive(rig, [Scripted(claude_lines("a step"))])
    assert shown == _log(rig)  # all of them (the armed event is the command line's)
    assert shown[-1] == "abort"
    # The first step went on: its lines waited for the second agent's start.
    second = runner.before_start[1]
    assert "iteration_end" not in second and second.count("iteration_start") == 1


def test_a_step_that_ends_the_run_is_shown_at_once(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=1))
    shown, _ = _drive(rig, [Scripted(claude_lines("a step"))])
    assert shown == _log(rig)
    assert shown[-3:] == ["iteration_end", "decision_applied", "abort"]
