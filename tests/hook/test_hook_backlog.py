"""Hook runs over a backlog without a CLI: each Stop ends the item the session worked on
and starts the next, with the driver's own backlog shell (the agent's edits to
``tasks.jsonl`` undone, a person's answer taken, autopilot's checks)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from autopilot.cli.gate_cmds import give_answer
from autopilot.core.item_report import ItemDecision, ItemReport
from autopilot.store.paths import runs_root
from autopilot.store.reports import write_report
from tests.conftest import run_cli
from tests.hook.sessions import ArmedSession, armed_session, blocks, events_of, state_of

ITEMS = [
    {
        "id": "a",
        "prompt": "write a.md",
        "acceptance_criteria": [{"id": "ac1", "text": "a.md exists", "check": "test -f a.md"}],
    },
    {"id": "b", "prompt": "write b.md"},
]


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / ".autopilot").mkdir(exist_ok=True)
    (repo / ".autopilot" / "tasks.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    return repo


def _armed(tmp_path: Path, project: Path) -> ArmedSession:
    return armed_session(tmp_path, project, prompt=None, backlog=True, **{"max-iterations": "0"})


def _tasks(project: Path) -> dict[str, dict[str, Any]]:
    lines = (project / ".autopilot" / "tasks.jsonl").read_text().splitlines()
    return {d["id"]: d for d in map(json.loads, lines)}


def _report(run_id: str, item: str, decision: str, **criteria: bool) -> None:
    report = ItemReport(item, ItemDecision(decision), criteria, ("done",))
    write_report(runs_root() / run_id, report, ts_ms=1, iteration=None)


def test_the_agents_edits_to_tasks_jsonl_are_undone_at_the_next_stop(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = _armed(tmp_path, project)
    assert "work-item: a" in blocks(session.stop(clock, last="armed"))
    assert _tasks(project)["a"]["status"] == "running"
    # The agent marks its own item completed and drops the other one.
    tasks = project / ".autopilot" / "tasks.jsonl"
    tasks.write_text(json.dumps({**ITEMS[0], "status": "completed"}) + "\n")
    blocks(session.stop(clock, active=True, last="all done"))
    found = _tasks(project)
    assert set(found) == {"a", "b"}
    assert found["a"]["status"] == "running"  # no report: still the agent's to decide
    notes = [e["note"] for e in events_of(run_id) if e["type"] == "warning"]
    assert any("were changed while the agent worked; undone" in n for n in notes)
    assert any("b were removed while the agent worked; restored" in n for n in notes)


def test_a_reported_item_is_checked_and_the_backlog_completes(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = _armed(tmp_path, project)
    blocks(session.stop(clock, last="armed"))
    (project / "a.md").write_text("a\n")
    _report(run_id, "a", "continue_next", ac1=True)
    assert "work-item: b" in blocks(session.stop(clock, active=True, last="a done"))
    _report(run_id, "b", "continue_next")
    ended = json.loads(session.stop(clock, active=True, last="b done"))
    assert "ended: completed (backlog_done)" in ended["systemMessage"]
    assert {k: v["status"] for k, v in _tasks(project).items()} == {
        "a": "completed",
        "b": "completed",
    }
    assert state_of(run_id)["terminationReason"] == "backlog_done"


def test_a_question_lets_the_session_stop_until_it_is_answered(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = _armed(tmp_path, project)
    blocks(session.stop(clock, last="armed"))
    _report(run_id, "a", "ask_user_meta")
    held = json.loads(session.stop(clock, active=True, last="which one?"))
    assert "waits for your answer" in held["systemMessage"]
    assert state_of(run_id)["status"] == "awaiting_user"
    session.prompt("go on")
    assert session.stop(clock, last="still waiting") != ""  # held again, not continued
    give_answer(runs_root() / run_id, "use the new API")
    session.prompt("answered")
    prompt = blocks(session.stop(clock, last="ok"))
    assert "work-item: a" in prompt and "use the new API" in prompt
    gates = [(e.get("state"), e.get("itemId")) for e in events_of(run_id) if e["type"] == "gate"]
    assert gates == [(None, "a"), ("answered", "a")]  # asked at the stop, answered later


def test_paths_changed_outside_the_items_surface_reopen_it(tmp_path: Path, project: Path) -> None:
    fenced = [{**ITEMS[0], "allowed_surface": ["a.md"]}, ITEMS[1]]
    tasks = project / ".autopilot" / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(i) + "\n" for i in fenced))
    (project / "notes.txt").write_text("there before the iteration\n")
    clock, run_id, session = _armed(tmp_path, project)
    blocks(session.stop(clock, last="armed"))
    (project / "a.md").write_text("a\n")
    (project / "secrets.txt").write_text("x\n")
    _report(run_id, "a", "continue_next", ac1=True)
    blocks(session.stop(clock, active=True, last="a done"))
    (violation,) = [e for e in events_of(run_id) if e["type"] == "surface_violation"]
    assert violation["paths"] == ["secrets.txt"]  # not notes.txt, changed before it began
    ends = [(e["itemId"], e["status"]) for e in events_of(run_id) if e["type"] == "workitem_end"]
    assert ends == [("a", "reopened")]


def test_a_surface_violation_is_kept_on_the_items_record(tmp_path: Path, project: Path) -> None:
    fenced = [{**ITEMS[0], "allowed_surface": ["a.md"]}, ITEMS[1]]
    tasks = project / ".autopilot" / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(i) + "\n" for i in fenced))
    clock, run_id, session = _armed(tmp_path, project)
    blocks(session.stop(clock, last="armed"))
    (project / "a.md").write_text("a\n")
    (project / "secrets.txt").write_text("x\n")
    _report(run_id, "a", "continue_next", ac1=True)
    second = blocks(session.stop(clock, active=True, last="a done"))
    assert "- changed files outside the allowed surface: secrets.txt\n" in second
    record = _tasks(project)["a"]["completion"]
    assert record["surface_violations"] == ["secrets.txt"]
    assert record["evidence"] == [
        "done",
        "claim-evidence-map: ac1=pass",
        "surface-violation: changed files outside the allowed surface: secrets.txt",
    ]


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)


@pytest.mark.parametrize("committed", [False, True], ids=["in-the-work-tree", "committed"])
def test_an_attempt_that_undoes_a_change_outside_the_surface_completes_the_item(
    tmp_path: Path, project: Path, committed: bool
) -> None:
    """The surface is checked against the work tree as the item started: the second
    attempt's undo (a file deleted again, or a commit that reverts one) is no violation."""
    fenced = [{**ITEMS[0], "allowed_surface": ["a.md"]}, ITEMS[1]]
    tasks = project / ".autopilot" / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(i) + "\n" for i in fenced))
    clock, run_id, session = _armed(tmp_path, project)
    blocks(session.stop(clock, last="armed"))
    (project / "a.md").write_text("a\n")
    (project / "secrets.txt").write_text("x\n")
    if committed:
        _git(project, "add", "a.md", "secrets.txt")
        _git(project, "commit", "-qm", "a and a stray file")
    _report(run_id, "a", "continue_next", ac1=True)
    second = blocks(session.stop(clock, active=True, last="a done"))
    assert "work-item: a" in second and "secrets.txt" in second
    if committed:
        _git(project, "rm", "-q", "secrets.txt")
        _git(project, "commit", "-qm", "the stray file undone")
    else:
        (project / "secrets.txt").unlink()
    _report(run_id, "a", "continue_next", ac1=True)
    assert "work-item: b" in blocks(session.stop(clock, active=True, last="undone"))
    violations = [e["paths"] for e in events_of(run_id) if e["type"] == "surface_violation"]
    assert violations == [["secrets.txt"]]
    ends = [(e["itemId"], e["status"]) for e in events_of(run_id) if e["type"] == "workitem_end"]
    assert ends == [("a", "reopened"), ("a", "completed")]


def test_arm_max_item_attempts_blocks_an_item_whose_change_stays_outside_its_surface(
    tmp_path: Path, project: Path
) -> None:
    fenced = [{**ITEMS[0], "allowed_surface": ["a.md"]}, ITEMS[1]]
    tasks = project / ".autopilot" / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(i) + "\n" for i in fenced))
    clock, run_id, session = armed_session(
        tmp_path, project, prompt=None, backlog=True, **{"max-item-attempts": "2"}
    )
    blocks(session.stop(clock, last="armed"))
    (project / "a.md").write_text("a\n")
    (project / "secrets.txt").write_text("x\n")
    _report(run_id, "a", "continue_next", ac1=True)
    assert "work-item: a" in blocks(session.stop(clock, active=True, last="a done"))
    _report(run_id, "a", "continue_next", ac1=True)  # secrets.txt left there
    assert "work-item: b" in blocks(session.stop(clock, active=True, last="a done again"))
    a = _tasks(project)["a"]
    assert (a["status"], a["attempt"]) == ("blocked", 2)
    assert a["blocked_reason"] == (
        "2 attempts did not complete it (the limit is 2); last verdict fail: changed files "
        "outside the allowed surface: secrets.txt; autopilot tasks unblock a gives it 2 more"
    )
    ends = [(e["itemId"], e["status"]) for e in events_of(run_id) if e["type"] == "workitem_end"]
    assert ends == [("a", "reopened"), ("a", "blocked")]


@pytest.mark.parametrize("how", ["flag", "config"])
def test_arm_takes_the_attempt_limit_as_run_does(project: Path, how: str) -> None:
    args = ["arm", "--backlog", "--session", "s-1"]
    if how == "flag":
        args += ["--max-item-attempts", "5"]
    else:
        (project / ".autopilot" / "config.toml").write_text("max_item_attempts = 5\n")
    armed = run_cli(args, cwd=project)
    assert armed.returncode == 0, armed.stdout + armed.stderr
    (folder,) = [p for p in runs_root().iterdir() if (p / "state.json").exists()]
    assert state_of(folder.name)["config"]["max_item_attempts"] == 5
    assert events_of(folder.name)[0]["limits"]["max_item_attempts"] == 5
    refused = run_cli([*args[:4], "--max-item-attempts", "-1"], cwd=project)
    assert refused.returncode == 2
    assert "--max-item-attempts must be a whole number" in refused.stderr


def test_a_persons_change_during_the_sessions_turn_is_refused_not_undone(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = _armed(tmp_path, project)
    blocks(session.stop(clock, last="armed"))  # the turn on a begins
    before = (project / ".autopilot" / "tasks.jsonl").read_text()
    for args in (["block", "b", "--reason", "x"], ["edit", "b", "--prompt", "other"]):
        refused = run_cli(["tasks", *args], cwd=project)
        assert refused.returncode == 2, refused.stderr
        assert f"run {run_id} is in iteration 1 of its session" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    assert (project / ".autopilot" / "tasks.jsonl").read_text() == before
    _report(run_id, "a", "stop")
    session.stop(clock, active=True, last="stopping")  # the turn ends, the run stops
    assert run_cli(["tasks", "block", "b", "--reason", "x"], cwd=project).returncode == 0
    assert _tasks(project)["b"]["status"] == "blocked"


def test_a_backlog_gate_is_released_at_the_next_stop_once_the_item_is_unblocked(
    tmp_path: Path, project: Path
) -> None:
    tasks = project / ".autopilot" / "tasks.jsonl"
    held = {**ITEMS[1], "status": "blocked", "blocked_reason": "waiting for the key"}
    tasks.write_text(json.dumps(held) + "\n")
    clock, run_id, session = _armed(tmp_path, project)
    first = json.loads(session.stop(clock, last="armed"))
    assert "no work item can start: b is blocked" in first["systemMessage"]
    unblocked = run_cli(["tasks", "unblock", "b"], cwd=project)
    assert unblocked.returncode == 0, unblocked.stderr
    session.prompt("go on")
    assert "work-item: b" in blocks(session.stop(clock, last="ok"))
    gates = [e.get("state") for e in events_of(run_id) if e["type"] == "gate"]
    assert gates == ["waiting", "released"]
    assert state_of(run_id).get("gate") is None
