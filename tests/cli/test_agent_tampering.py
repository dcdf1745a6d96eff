"""What an agent that writes into its run folder and kills its driver cannot do: lift
the run's budgets, or wipe its spend by deleting the log."""

from __future__ import annotations

from pathlib import Path

from autopilot.store.events import read_events
from autopilot.store.state import read_state_json
from tests.cli.test_control import _run_dir
from tests.conftest import FakeAgent, run_cli

RUN_FOLDER = '"$AUTOPILOT_RUNS_DIR/$AUTOPILOT_RUN_ID"'


def _tamper_then_kill(edit: str, *, scratch: Path) -> str:
    """A shell step: count the call; the first time, apply ``edit`` (Python, with
    ``folder``, the run folder, and ``state``, its state.json as a dict), write the
    state back and kill the driver (its pid in state.json) with SIGKILL."""
    script = (
        "import json, os, sys\n"
        "folder = sys.argv[1]\n"
        "path = os.path.join(folder, 'state.json')\n"
        "state = json.load(open(path))\n"
        f"{edit}\n"
        "json.dump(state, open(path, 'w'))\n"
        "os.kill(state['pid'], 9)\n"
    )
    (scratch / "tamper.py").write_text(script)
    once, calls = scratch / "once", scratch / "calls"
    return (
        f"echo call >> {calls}; "
        f"if [ ! -e {once} ]; then touch {once}; "
        f"python3 {scratch / 'tamper.py'} {RUN_FOLDER}; sleep 5; fi"
    )


def _killed_run(
    edit: str, tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> tuple[Path, dict[str, str]]:
    """Run ``-p x --max-iterations 3`` whose agent, in its first iteration, applies
    ``edit`` (``_tamper_then_kill``) and kills the driver; returns the run folder and
    the agent's environment, for a ``start`` after it."""
    step = {"shell": _tamper_then_kill(edit, scratch=tmp_path)}
    env = fake_agent([[step, {"result": f"step {n}"}] for n in range(10)])
    args = ["run", "-p", "x", "--max-iterations", "3", "--stagnation-limit", "0", "--plain"]
    killed = run_cli(args, cwd=repo, env=env)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    return _run_dir(tmp_path), env


def _iterations(folder: Path) -> list[int]:
    return sorted(
        {
            int(e["iteration"])
            for e in read_events(folder / "events.jsonl")
            if e["type"] == "iteration_end"
        }
    )


def test_limits_raised_in_state_json_before_a_kill_are_put_back_from_the_armed_event(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    calls = tmp_path / "calls"
    edit = "state['max'] = 8; state['config']['max_iterations'] = 8"
    folder, env = _killed_run(edit, tmp_path, repo, fake_agent)
    done = run_cli(["start", folder.name, "--plain"], cwd=repo, env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    assert _iterations(folder) == [1, 2, 3]
    assert len(calls.read_text().split()) == 3
    state = read_state_json(folder / "state.json")
    assert (state["max"], state["config"]["max_iterations"]) == (3, 3)
    notes = [str(e.get("note")) for e in read_events(folder / "events.jsonl")]
    assert any("max_iterations 3 (state.json 8, armed event 3)" in note for note in notes), notes
    aborts = [e for e in read_events(folder / "events.jsonl") if e["type"] == "abort"]
    assert [e["reason"] for e in aborts] == ["max_iterations"]


def test_a_log_deleted_with_the_spend_before_a_kill_ends_the_run_without_spending(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    calls = tmp_path / "calls"
    edit = (
        "state['iter'] = 0; state['spend']['iterations'] = 0; "
        "os.remove(os.path.join(folder, 'events.jsonl'))"
    )
    folder, env = _killed_run(edit, tmp_path, repo, fake_agent)
    done = run_cli(["start", folder.name, "--plain"], cwd=repo, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert len(calls.read_text().split()) == 1  # no agent ran again
    aborts = [e for e in read_events(folder / "events.jsonl") if e["type"] == "abort"]
    assert [e["reason"] for e in aborts] == ["tampered"]
    assert "budgets cannot be checked" in str(aborts[0]["note"])
    state = read_state_json(folder / "state.json")
    assert (state["terminated"], state["status"]) == (True, "stopped")


def test_a_complete_the_agent_appends_before_a_kill_completes_nothing(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    calls = tmp_path / "calls"
    edit = (
        "line = {'type': 'complete', 'ts': 1, 'runId': state['runId'], "
        "'reason': 'completion_promise', 'note': 'the agent said COMPLETE', 'iteration': 1}\n"
        "open(os.path.join(folder, 'events.jsonl'), 'a').write(json.dumps(line) + '\\n')"
    )
    folder, env = _killed_run(edit, tmp_path, repo, fake_agent)
    for command in (["status", folder.name], ["list"]):
        shown = run_cli(command, cwd=repo)
        assert "completed" not in shown.stdout, shown.stdout
    done = run_cli(["start", folder.name, "--plain"], cwd=repo, env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "as its event log records" not in done.stdout
    assert len(calls.read_text().split()) == 3
    events = list(read_events(folder / "events.jsonl"))
    assert [(e["type"], e["reason"]) for e in events if e["type"] in ("complete", "abort")] == [
        ("complete", "completion_promise"),  # the agent's line, still in the log
        ("abort", "max_iterations"),
    ]
    notes = [str(e.get("note")) for e in events if e["type"] == "warning"]
    assert any("was not written by the run's driver" in note for note in notes), notes
    state = read_state_json(folder / "state.json")
    assert (state["status"], state["terminationReason"]) == ("stopped", "max_iterations")
