"""The environment a relaunched run's agent gets: the relauncher's, with the names
(never the values) of the agent's variables the run started with kept, so a relaunch
that lacks some says which."""

from __future__ import annotations

from pathlib import Path

import pytest

from autopilot.cli.control_body import env_text
from autopilot.config import RunConfig
from autopilot.store.state import read_state
from tests.fakes import Scripted, SimulatedCrash, arm, claude_lines
from tests.loop.test_driver import _of, working

SECRET = "sk-ant-api03-" + "x" * 40
STARTED_WITH = {
    "PATH": "/usr/bin",
    "ANTHROPIC_API_KEY": SECRET,
    "CLAUDE_CONFIG_DIR": "/home/me/.claude",
    "TERM": "xterm",
}


def test_a_relaunch_that_lacks_the_agents_variables_says_which(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3))
    first, _ = rig.driver(
        [working(rig), Scripted(claude_lines("x"), crash=True)], base_env=STARTED_WITH
    )
    with pytest.raises(SimulatedCrash):
        first.run()
    state = read_state(rig.folder / "state.json")
    assert state.agent_env == ("ANTHROPIC_API_KEY", "CLAUDE_CONFIG_DIR")
    assert state.env_missing == ()
    assert "(a relaunch passes on its own shell's environment)" in env_text(state)
    # Relaunched from a login service, say, whose environment has no API key.
    later = {"PATH": "/usr/bin", "CLAUDE_CONFIG_DIR": "/home/me/.claude"}
    relaunched, runner = rig.driver([working(rig)], base_env=later)
    assert relaunched.run().reason == "max_iterations"
    assert "ANTHROPIC_API_KEY" not in runner.requests[0].env
    state = read_state(rig.folder / "state.json")
    assert state.agent_env == ("ANTHROPIC_API_KEY", "CLAUDE_CONFIG_DIR")  # the run's own
    assert state.env_missing == ("ANTHROPIC_API_KEY",)
    [warning] = [e for e in _of(rig, "warning") if "envMissing" in e]
    assert warning["envMissing"] == ["ANTHROPIC_API_KEY"]
    assert "lacks ANTHROPIC_API_KEY, which the run started with" in warning["note"]
    assert env_text(state).startswith("lacks ANTHROPIC_API_KEY")
    # Names only: no value of the environment is written anywhere in the run folder.
    for path in rig.folder.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


def test_a_relaunch_with_the_same_variables_warns_of_nothing(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    first, _ = rig.driver(
        [working(rig), Scripted(claude_lines("x"), crash=True)], base_env=STARTED_WITH
    )
    with pytest.raises(SimulatedCrash):
        first.run()
    relaunched, _ = rig.driver([working(rig)], base_env=dict(STARTED_WITH, TERM="dumb"))
    relaunched.run()
    assert [e for e in _of(rig, "warning") if "envMissing" in e] == []
    assert read_state(rig.folder / "state.json").env_missing == ()
