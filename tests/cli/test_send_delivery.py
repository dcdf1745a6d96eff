"""Messages reach the agent through the real driver: in the next prompt, recorded at
hand-off, handed again (not recorded again) after the driver is killed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.cli.test_control import _events, _run_dir, _start, _state, _terminals, _wait_for
from tests.conftest import FakeAgent, run_cli


def _wait_file(name: str) -> dict[str, str]:
    return {"shell": f"while [ ! -f {name} ]; do sleep 0.05; done"}


def _delivered(folder: Path) -> list[dict[str, object]]:
    return [e for e in _events(folder) if e["type"] == "message_delivered"]


def test_a_message_sent_mid_iteration_is_in_the_next_prompt_once(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent(
        [
            [_wait_file("go"), {"result": "first"}],
            [{"echo_prompt": True}, {"result": "COMPLETE"}],
        ]
    )
    proc = _start(repo, env, "--max-iterations", "3", "--stagnation-limit", "0")
    folder = _run_dir(tmp_path)
    _wait_for(lambda: isinstance(_state(folder).get("agentPid"), int))
    sent = run_cli(["send", "MSG-ONE: use the new API"], cwd=repo)
    assert sent.returncode == 0, sent.stderr
    (repo / "go").write_text("")
    assert proc.wait(timeout=60) == 0
    assert "MSG-ONE" not in (folder / "iter-0001" / "prompt.md").read_text()
    second = (folder / "iter-0002" / "prompt.md").read_text()
    assert second.startswith("work") and "MSG-ONE: use the new API" in second
    assert [(e["iteration"], e["source"]) for e in _delivered(folder)] == [(2, "user")]
    types = [e["type"] for e in _events(folder)]
    # Recorded at hand-off: after the iteration started, never before.
    assert types.index("message_delivered") > types.index("iteration_start", 3)
    assert list((folder / "inbox" / "cur").iterdir()) == []
    assert len(list((folder / "inbox" / "done").iterdir())) == 1


def test_a_message_handed_to_a_killed_attempt_is_handed_again_and_recorded_once(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent(
        [
            [_wait_file("go1"), {"result": "first"}],
            [{"echo_prompt": True}, _wait_file("go2"), {"result": "second"}],
            [{"echo_prompt": True}, {"result": "COMPLETE"}],
        ]
    )
    proc = _start(repo, env, "--max-iterations", "5", "--stagnation-limit", "0")
    folder = _run_dir(tmp_path)
    _wait_for(lambda: isinstance(_state(folder).get("agentPid"), int))
    assert run_cli(["send", "MSG-TWO"], cwd=repo).returncode == 0
    (repo / "go1").write_text("")
    _wait_for(lambda: len(_delivered(folder)) == 1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    (repo / "go2").write_text("")
    done = run_cli(["start", folder.name, "--plain"], cwd=repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "MSG-TWO" in (folder / "iter-0002" / "prompt.md").read_text()
    assert "MSG-TWO" in (folder / "iter-0003" / "prompt.md").read_text()
    assert [e["iteration"] for e in _delivered(folder)] == [2]
    assert _terminals(folder) == [("complete", "completion_promise")]
    assert list((folder / "inbox" / "cur").iterdir()) == []
    assert _state(folder)["delivery"] == {"handed": {}, "retired": []}


def test_a_budget_warning_reaches_the_next_iteration_after_the_users_messages(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent(
        [
            [_wait_file("go"), {"result": "first", "cost_usd": 0.85}],
            [{"echo_prompt": True}, {"result": "COMPLETE", "cost_usd": 0.01}],
        ]
    )
    proc = _start(repo, env, "--max-cost", "1", "--stagnation-limit", "0")
    folder = _run_dir(tmp_path)
    _wait_for(lambda: isinstance(_state(folder).get("agentPid"), int))
    assert run_cli(["send", "USER-NOTE"], cwd=repo).returncode == 0
    (repo / "go").write_text("")
    assert proc.wait(timeout=60) == 0
    prompt = (folder / "iter-0002" / "prompt.md").read_text()
    assert prompt.index("USER-NOTE") < prompt.index("85% of the cost budget is spent")
    kinds = [(e["source"], e["kind"]) for e in _delivered(folder)]
    assert kinds == [("user", "message"), ("driver", "budget_warning")]


def test_a_message_the_run_ended_before_is_said_to_be_undelivered(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[_wait_file("go"), {"result": "COMPLETE"}]])
    proc = _start(repo, env)
    folder = _run_dir(tmp_path)
    _wait_for(lambda: isinstance(_state(folder).get("agentPid"), int))
    assert run_cli(["send", "--no-start", "too late"], cwd=repo).returncode == 0
    (repo / "go").write_text("")
    assert proc.wait(timeout=60) == 0
    warnings = [e for e in _events(folder) if e["type"] == "warning"]
    assert any("1 message(s) never reached the agent" in str(e["note"]) for e in warnings)
    assert _delivered(folder) == []
    status = run_cli(["status", folder.name], cwd=repo).stdout
    assert "messages   1 of yours never delivered (the run ended first)" in status
