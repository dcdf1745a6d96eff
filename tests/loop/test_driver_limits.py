"""A relaunched driver holds each limit to the stricter of ``state.json`` and the
run's ``armed`` event: an agent that rewrites either (and kills its driver) cannot
lift a budget, and a budget it lowered costs nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autopilot.config import RunConfig
from autopilot.store.state import read_state
from tests.fakes import Rig, Scripted, SimulatedCrash, arm, claude_lines
from tests.loop.test_driver import _of, working


def _crash_after(rig: Rig, edit: Any) -> None:
    """Drive one iteration that crashes (as ``kill -9`` of the driver would), then
    apply ``edit`` to the run folder while no driver runs."""
    lost = Scripted(claude_lines("step"), crash=True, on_start=lambda _: rig.workspace.edit())
    driver, _ = rig.driver([lost])
    with pytest.raises(SimulatedCrash):
        driver.run()
    edit(rig.folder)


def _rewrite_armed_limits(folder: Path, **limits: Any) -> None:
    path = folder / "events.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    armed = json.loads(lines[0])
    armed["limits"].update(limits)
    lines[0] = json.dumps(armed) + "\n"
    path.write_text("".join(lines))


def _rewrite_state_config(folder: Path, **config: Any) -> None:
    path = folder / "state.json"
    data = json.loads(path.read_text())
    data["config"].update(config)
    if "max_iterations" in config:
        data["max"] = config["max_iterations"]
    path.write_text(json.dumps(data))


def _relaunch(rig: Rig, attempts: int = 10) -> tuple[str, int]:
    driver, runner = rig.driver([working(rig, f"step {n}") for n in range(attempts)])
    result = driver.run()
    return result.reason or "", len(runner.requests)


def _limit_notes(rig: Rig) -> list[str]:
    return [e["note"] for e in _of(rig, "warning") if "armed event" in e["note"]]


def test_limits_lifted_in_the_armed_event_are_refused_on_relaunch(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3, max_item_attempts=2, stagnation_limit=0))
    _crash_after(rig, lambda f: _rewrite_armed_limits(f, max_iterations=50, max_item_attempts=0))
    assert _relaunch(rig) == ("max_iterations", 2)  # the crashed attempt was the first
    state = read_state(rig.folder / "state.json")
    assert (state.max_iterations, state.config.max_iterations) == (3, 3)
    assert state.config.max_item_attempts == 2
    [note] = _limit_notes(rig)
    assert "max_iterations 3 (state.json 3, armed event 50)" in note, note
    assert "max_item_attempts 2 (state.json 2, armed event 0: no limit)" in note, note


def test_limits_raised_in_state_json_are_put_back_on_relaunch(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3, max_cost_usd=1.0, stagnation_limit=0))
    _crash_after(rig, lambda f: _rewrite_state_config(f, max_iterations=50, max_cost_usd=None))
    assert _relaunch(rig) == ("max_iterations", 2)
    state = read_state(rig.folder / "state.json")
    assert (state.max_iterations, state.config.max_cost_usd) == (3, 1.0)
    [note] = _limit_notes(rig)
    assert "max_iterations 3 (state.json 50, armed event 3)" in note, note


def test_a_limit_lowered_in_state_json_is_kept(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=5, stagnation_limit=0))
    _crash_after(rig, lambda f: _rewrite_state_config(f, max_iterations=2))
    assert _relaunch(rig) == ("max_iterations", 1)
    assert read_state(rig.folder / "state.json").max_iterations == 2
    [note] = _limit_notes(rig)
    assert "max_iterations 2 (state.json 2, armed event 5)" in note, note


def test_both_files_rewritten_keep_the_stricter_of_each(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=4, max_tokens=10**6, stagnation_limit=0))

    def both(folder: Path) -> None:
        _rewrite_armed_limits(folder, max_iterations=40, max_tokens=150)
        _rewrite_state_config(folder, max_iterations=3, max_tokens=None)

    _crash_after(rig, both)
    # 3 iterations (from state.json) unless the tokens (from the log) run out first:
    # each attempt reports 110 tokens, so the second one reaches 150.
    reason, _ = _relaunch(rig)
    assert reason == "max_tokens"
    state = read_state(rig.folder / "state.json")
    assert (state.max_iterations, state.config.max_tokens) == (3, 150)
