"""What a run was armed with is in its ``armed`` event (or, when the line cannot hold
it, in ``launch.json`` with its digest), so ``doctor --repair`` rebuilds a lost
``state.json`` that ``start`` can go on with: the prompt (text of any size, or a file),
every budget, the agent's arguments, the work tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autopilot.config import RunConfig
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.manage.repair import repair_state
from autopilot.store.events import MAX_EVENT_LINE_BYTES, read_events
from autopilot.store.index import read_index
from autopilot.store.paths import runs_root
from autopilot.store.run_state import REBUILT_MARK, PromptSource, RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state
from autopilot.view.plain import format_event

CONFIG = RunConfig(
    max_iterations=12,
    max_cost_usd=4.25,
    max_tokens=900_000,
    max_duration_seconds=5400.0,
    completion_promise="SHIPPED",
    stagnation_limit=0,
    verify=("make test",),
)


def _arm(root: Path, repo: Path, prompt: PromptSource, config: RunConfig = CONFIG) -> RunDir:
    run_id = arm_run(root, config, prompt, repo, SystemClock(), extra_args=("--verbose",))
    return RunDir(root / run_id)


def _lose_state_and_repair(folder: RunDir) -> RunState:
    folder.state.write_text('{"runId": "torn')
    assert repair_state(folder, SystemClock()) is not None
    return read_state(folder.state)


def _armed(folder: RunDir) -> dict[str, object]:
    return next(e for e in read_events(folder.events) if e["type"] == "armed")


def test_a_short_prompt_and_the_budgets_travel_in_the_armed_event(repo: Path) -> None:
    folder = _arm(runs_root(), repo, PromptSource(text="Fix the flaky test"))
    launch = _armed(folder)["launch"]
    assert isinstance(launch, dict) and launch["prompt"]["text"] == "Fix the flaky test"
    assert not folder.launch.exists()
    state = _lose_state_and_repair(folder)
    assert state.prompt == PromptSource(text="Fix the flaky test")
    assert state.config == CONFIG and state.extra_args == ("--verbose",)
    assert REBUILT_MARK not in state.extra and state.paused and not state.terminated
    # The index row stays small: the launch is only in the run's own log.
    [row] = list(read_index(runs_root()))
    assert "launch" not in row and row["runId"] == folder.run_id


def test_a_140_kb_prompt_is_kept_beside_the_log_and_comes_back_whole(repo: Path) -> None:
    text = "".join(f"Step {n}: keep the public API é stable.\n" for n in range(3500))
    assert len(text.encode()) > 140_000
    folder = _arm(runs_root(), repo, PromptSource(text=text))
    assert all(len(line) < MAX_EVENT_LINE_BYTES for line in folder.events.read_bytes().split())
    launch = _armed(folder)["launch"]
    assert isinstance(launch, dict) and launch["file"] == "launch.json"
    state = _lose_state_and_repair(folder)
    assert state.prompt.text == text and state.config == CONFIG


def test_a_prompt_file_is_recorded_by_its_path(repo: Path) -> None:
    prompt_file = repo / "PROMPT.md"
    prompt_file.write_text("Work through TODO.md\n" * 8000)
    folder = _arm(runs_root(), repo, PromptSource(path=prompt_file))
    assert not folder.launch.exists()  # a path fits in the line, whatever the file's size
    state = _lose_state_and_repair(folder)
    assert state.prompt == PromptSource(path=prompt_file)


def test_what_the_log_would_redact_is_kept_beside_it_unredacted(repo: Path) -> None:
    hook = "json://alice:s3cretpassw0rd@127.0.0.1:9/hook"
    config = RunConfig(notify=(hook,), stagnation_limit=0)
    folder = _arm(runs_root(), repo, PromptSource(text="go"), config)
    assert "s3cretpassw0rd" not in folder.events.read_text()
    assert _lose_state_and_repair(folder).config.notify == (hook,)


def test_a_damaged_launch_file_is_never_used(repo: Path) -> None:
    folder = _arm(runs_root(), repo, PromptSource(text="x" * 20_000))
    record = json.loads(folder.launch.read_text())
    record["config"]["max_cost_usd"] = 999.0
    folder.launch.write_text(json.dumps(record))
    state = _lose_state_and_repair(folder)
    assert state.extra.get(REBUILT_MARK) is True  # start refuses it
    assert state.prompt == PromptSource() and state.config.max_cost_usd is None


@pytest.mark.parametrize(
    "launch",
    [
        "a string",
        {"config": {"max_cost_usd": "lots"}, "prompt": {"text": "go"}},
        {"config": {}, "prompt": {"text": 7}},
        {"config": {}, "prompt": {"text": "go"}, "extraArgs": [1]},
        {"file": "../../elsewhere.json", "sha256": "0" * 64},
    ],
)
def test_a_malformed_launch_leaves_the_run_marked_as_rebuilt(
    tmp_path: Path, repo: Path, launch: object
) -> None:
    folder = _arm(runs_root(), repo, PromptSource(text="go"))
    lines = folder.events.read_text().splitlines()
    armed = json.loads(lines[0])
    armed["launch"] = launch
    folder.events.write_text("\n".join([json.dumps(armed), *lines[1:]]) + "\n")
    state = _lose_state_and_repair(folder)
    assert state.extra.get(REBUILT_MARK) is True and state.config.max_iterations == 12


def test_plain_output_shows_the_armed_event_without_its_launch(repo: Path) -> None:
    folder = _arm(runs_root(), repo, PromptSource(text="Fix the flaky test"))
    line = format_event(_armed(folder))
    assert "armed" in line and "maxIterations=12" in line
    assert "launch" not in line and "Fix the flaky test" not in line


def test_a_worktree_run_keeps_its_worktree_through_a_repair(repo: Path) -> None:
    root = runs_root()
    run_id = arm_run(root, CONFIG, PromptSource(text="go"), repo, SystemClock(), worktree=True)
    folder = RunDir(root / run_id)
    before = read_state(folder.state)
    assert isinstance(before.extra.get("worktree"), dict)
    state = _lose_state_and_repair(folder)
    assert state.extra["worktree"] == before.extra["worktree"] and state.cwd == before.cwd
