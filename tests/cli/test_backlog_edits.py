"""People editing ``.autopilot/tasks.jsonl`` while a backlog run reads it, from other
terminals, with the real command line: ``autopilot tasks add`` from two terminals at
once, a line broken between iterations (the run pauses naming it, nothing
rewritten), a dependency cycle added between iterations (named; a gate once nothing else can start), and
``approve`` from two terminals. The agent is the fake agent reporting through the real
``autopilot report``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from autopilot.store.events import read_events
from tests.cli.test_control import _run_dir, _wait_for
from tests.conftest import FakeAgent, read_jsonl, run_cli

TIMEOUT = 120.0
_RUNNING_ITEM = (
    "import json; print(next(i['id'] for i in map(json.loads, open('.autopilot/tasks.jsonl')) "
    "if i.get('status') == 'running'))"
)


def _agent_step(wait_for: str | None = None) -> dict[str, str]:
    """Find the running item, (wait for a file,) report continue_next for it."""
    wait = f"while [ ! -f ../{wait_for} ]; do sleep 0.05; done; " if wait_for else ""
    return {
        "shell": (
            f'{wait}item=$({sys.executable} -c "{_RUNNING_ITEM}") && '
            f'{sys.executable} -m autopilot report continue_next --item "$item" --evidence done'
        )
    }


def _start(repo: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "autopilot", "run", "--backlog", "--plain", *args],
        cwd=repo,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _tasks(repo: Path) -> list[dict[str, Any]]:
    return read_jsonl(repo / ".autopilot" / "tasks.jsonl")


def _events(repo: Path) -> list[dict[str, Any]]:
    return list(read_events(_run_dir(repo.parent) / "events.jsonl"))


def _completed_once(events: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in events:
        if event["type"] == "workitem_end" and event["status"] == "completed":
            counts[event["itemId"]] = counts.get(event["itemId"], 0) + 1
    return counts


def test_two_terminals_add_items_while_the_run_drains_them(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    run_cli(["tasks", "add", "Hold the first iteration", "--id", "first"], cwd=repo)
    # The first item's agent works until both terminals are done adding.
    env = fake_agent(
        [[_agent_step("adds-done"), {"result": "ok"}], [_agent_step(), {"result": "ok"}]]
    )
    proc = _start(repo, env, "--max-iterations", "30")
    _wait_for(lambda: any(e["type"] == "iteration_start" for e in _events(repo)), TIMEOUT)
    failures: list[str] = []

    def terminal(name: str) -> None:
        for n in range(6):
            done = run_cli(["tasks", "add", f"{name} {n}", "--id", f"{name}-{n}"], cwd=repo)
            if done.returncode != 0:
                failures.append(done.stderr)

    terminals = [threading.Thread(target=terminal, args=(name,)) for name in ("left", "right")]
    for thread in terminals:
        thread.start()
    for thread in terminals:
        thread.join()
    (tmp_path / "adds-done").touch()
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out
    assert failures == []
    expected = {"first"} | {f"{side}-{n}" for side in ("left", "right") for n in range(6)}
    items = _tasks(repo)
    assert {i["id"] for i in items} == expected and len(items) == len(expected)
    assert {i["status"] for i in items} == {"completed"}
    events = _events(repo)
    assert _completed_once(events) == dict.fromkeys(expected, 1)
    assert [e["reason"] for e in events if e["type"] in ("complete", "abort")] == ["backlog_done"]


def test_a_broken_line_and_a_cycle_added_mid_run(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    run_cli(["tasks", "add", "Write a", "--id", "a"], cwd=repo)
    run_cli(["tasks", "add", "Write b", "--id", "b", "--depends-on", "a"], cwd=repo)
    env = fake_agent(
        [[_agent_step("edited"), {"result": "COMPLETE"}], [_agent_step(), {"result": "COMPLETE"}]]
    )
    proc = _start(repo, env, "--max-iterations", "12")
    _wait_for(lambda: any(e["type"] == "iteration_start" for e in _events(repo)), TIMEOUT)
    # While the agent works, autopilot owns the file: the person pauses the run first.
    assert run_cli(["pause"], cwd=repo).returncode == 0
    (tmp_path / "edited").touch()
    _wait_for(lambda: any(e["type"] == "pause" for e in _events(repo)), TIMEOUT)
    # Between iterations, a person types a half line at line 2 and adds a cycle.
    path = repo / ".autopilot" / "tasks.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(1, b'{"id": "d", "prompt": "Write d"\n')
    lines += [b'{"id":"x","depends_on":["y"]}\n', b'{"id":"y","depends_on":["x"]}\n']
    path.write_bytes(b"".join(lines))
    assert run_cli(["resume"], cwd=repo).returncode == 0

    def held_notes() -> list[str]:
        return [
            str(e["note"])
            for e in _events(repo)
            if e["type"] == "pause" and "tasks.jsonl" in str(e.get("note"))
        ]

    _wait_for(lambda: bool(held_notes()), TIMEOUT)
    note = held_notes()[0]
    assert ".autopilot/tasks.jsonl line 2: not valid JSON" in note
    status = run_cli(["status"], cwd=repo)  # why it is paused, not only that it is
    assert "paused — fix .autopilot/tasks.jsonl first: .autopilot/tasks.jsonl line 2" in (
        status.stdout
    ), status.stdout
    held = path.read_bytes().splitlines(keepends=True)
    assert held[1] == lines[1] and len(held) == len(lines)  # the broken line kept, in place
    ids = [json.loads(line)["id"] for n, line in enumerate(held) if n != 1]
    assert ids == ["a", "b", "x", "y"]
    assert json.loads(held[0])["status"] == "completed"
    # The person fixes the line: the run goes on by itself, and names the cycle.
    path.write_bytes(path.read_bytes().replace(lines[1], b'{"id": "d", "prompt": "Write d"}\n'))

    def gated() -> bool:
        return any(e["type"] == "gate" and e.get("state") == "waiting" for e in _events(repo))

    _wait_for(gated, TIMEOUT)
    events = _events(repo)
    question = next(e["question"] for e in events if e["type"] == "gate")
    assert question == "no work item can start: dependency cycle: x -> y -> x"
    warnings = [e["note"] for e in events if e["type"] == "warning"]
    assert warnings.count("tasks.jsonl: dependency cycle: x -> y -> x") == 1
    assert not any("deleted" in w for w in warnings)
    # The person sets x aside: that is what the gate asked, and the run goes on by
    # itself (no answer needed); an approve after it finds nothing to answer.
    edit = run_cli(["tasks", "edit", "x", "--status", "not_applicable"], cwd=repo)
    assert edit.returncode == 0, edit.stderr

    def released() -> bool:
        return any(e["type"] == "gate" and e.get("state") == "released" for e in _events(repo))

    _wait_for(released, TIMEOUT)
    late = run_cli(["approve"], cwd=repo)
    assert late.returncode == 2, late.stderr
    assert "is not waiting for an answer" in late.stderr or "has ended" in late.stderr
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out
    statuses = {i["id"]: i["status"] for i in _tasks(repo)}
    assert statuses == {
        "a": "completed",
        "d": "completed",
        "b": "completed",
        "x": "not_applicable",
        "y": "completed",
    }
    assert _completed_once(_events(repo)) == {"a": 1, "d": 1, "b": 1, "y": 1}
    state = json.loads((_run_dir(repo.parent) / "state.json").read_text())
    assert state["hold"] is None


def test_a_plain_run_waiting_at_a_gate_says_the_whole_question_and_how_to_answer(
    repo: Path, fake_agent: FakeAgent
) -> None:
    """A run in the foreground waits at a gate until a person answers from another
    terminal; its plain output names the whole question and the two commands."""
    run_cli(["tasks", "add", "Held back", "--id", "held"], cwd=repo)
    assert run_cli(["tasks", "block", "held", "--reason", "x" * 300], cwd=repo).returncode == 0
    proc = _start(repo, fake_agent([[{"result": "ok"}]]), "--max-iterations", "3")
    try:

        def gated() -> bool:
            return any(e["type"] == "gate" and e.get("state") == "waiting" for e in _events(repo))

        _wait_for(gated, TIMEOUT)
        assert run_cli(["stop"], cwd=repo).returncode == 0
        out, _ = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    run_id = _run_dir(repo.parent).name
    hint = next(line for line in out.splitlines() if "waits for your answer" in line)
    assert "x" * 300 in hint  # the whole question, not the event line's 160 characters
    assert hint.endswith(f"autopilot answer {run_id} TEXT, or autopilot approve {run_id}")
