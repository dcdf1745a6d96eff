"""A hook run's Stop holds each limit to the stricter of ``state.json`` and the run's
``armed`` event, as a driver does: an agent in the session that rewrites either file
cannot lift the run's budgets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autopilot.store.paths import runs_root
from tests.hook.sessions import armed_session, blocks, events_of, state_of


def _rewrite_armed_limits(run_id: str, **limits: Any) -> None:
    path = runs_root() / run_id / "events.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    armed = json.loads(lines[0])
    armed["limits"].update(limits)
    lines[0] = json.dumps(armed) + "\n"
    path.write_text("".join(lines))


def _rewrite_state_config(run_id: str, **config: Any) -> None:
    path = runs_root() / run_id / "state.json"
    data = json.loads(path.read_text())
    data["config"].update(config)
    data["max"] = config.get("max_iterations", data["max"])
    path.write_text(json.dumps(data))


def _notes(run_id: str) -> list[str]:
    return [str(e.get("note")) for e in events_of(run_id) if e["type"] == "warning"]


def test_an_iteration_budget_raised_in_state_json_is_refused(tmp_path: Path, project: Path) -> None:
    clock, run_id, session = armed_session(tmp_path, project, **{"max-iterations": "1"})
    blocks(session.stop(clock, last="ok"))
    _rewrite_state_config(run_id, max_iterations=50, max_cost_usd=None)
    ended = json.loads(session.stop(clock, active=True, last="still going"))
    assert "max_iterations" in ended["systemMessage"]
    assert state_of(run_id)["terminationReason"] == "max_iterations"
    assert (state_of(run_id)["max"], state_of(run_id)["config"]["max_iterations"]) == (1, 1)
    assert any("max_iterations 1 (state.json 50, armed event 1)" in n for n in _notes(run_id))


def test_an_iteration_budget_raised_in_the_armed_event_is_refused(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = armed_session(tmp_path, project, **{"max-iterations": "1"})
    blocks(session.stop(clock, last="ok"))
    _rewrite_armed_limits(run_id, max_iterations=50)
    ended = json.loads(session.stop(clock, active=True, last="still going"))
    assert "max_iterations" in ended["systemMessage"]
    assert state_of(run_id)["terminationReason"] == "max_iterations"
    assert any("max_iterations 1 (state.json 1, armed event 50)" in n for n in _notes(run_id))


def test_a_log_that_no_longer_begins_with_the_armed_event_ends_the_run(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = armed_session(tmp_path, project, **{"max-iterations": "5"})
    blocks(session.stop(clock, last="ok"))
    path = runs_root() / run_id / "events.jsonl"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[1:]))
    ended = json.loads(session.stop(clock, active=True, last="still going"))
    assert "budgets cannot be checked" in ended["systemMessage"]
    assert state_of(run_id)["terminationReason"] == "tampered"
