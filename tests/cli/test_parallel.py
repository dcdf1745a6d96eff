"""``autopilot run --backlog --parallel N`` end to end: real git, real processes (each
lane a daemon under its supervisor), the demo agent reporting through ``autopilot
report``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from tests.conftest import read_jsonl, run_cli
from tests.workspace.gitstate import git

DEMO = {"AUTOPILOT_DEMO_DELAY": "0"}


def _item(item_id: str, path: str, **fields: Any) -> dict[str, Any]:
    check = {"id": "ac1", "text": "exists", "check": f"test -f {path}"}
    return {"id": item_id, "prompt": f"Write {path}: item {item_id}.", **fields} | {
        "acceptance_criteria": [check]
    }


def _backlog(repo: Path, *items: dict[str, Any]) -> Path:
    (repo / ".autopilot").mkdir(exist_ok=True)
    tasks = repo / ".autopilot" / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(item) + "\n" for item in items))
    return tasks


def _runs(tmp_path: Path) -> tuple[Path, list[Path]]:
    folders = [p for p in (tmp_path / "runs").iterdir() if p.name.startswith("repo-")]
    parent = [p for p in folders if "-lane" not in p.name]
    assert len(parent) == 1, folders
    return parent[0], sorted(p for p in folders if "-lane" in p.name)


def _items(tasks: Path) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in map(json.loads, tasks.read_text().splitlines())}


def test_two_agents_drain_a_backlog_into_the_run_branch_then_merge(
    tmp_path: Path, repo: Path
) -> None:
    tasks = _backlog(
        repo,
        _item("a", "a.md"),
        _item("b", "b.md"),
        _item("c", "c.md", depends_on=["a"]),
    )
    done = run_cli(["run", "--backlog", "--parallel", "2", "--agent", "demo"], cwd=repo, env=DEMO)

    assert done.returncode == 0, done.stdout + done.stderr
    parent, lanes = _runs(tmp_path)
    assert len(lanes) == 2
    items = _items(tasks)
    assert {item["status"] for item in items.values()} == {"completed"}
    assert {item["claimed_by"] for item in items.values()} <= {lane.name for lane in lanes}
    branch = f"autopilot/{parent.name}"
    assert {"a.md", "b.md", "c.md"} <= set(git(repo, "ls-tree", "--name-only", branch).split())
    assert not (repo / "a.md").exists()  # the checkout is not written before the merge
    merged = [e for lane in lanes for e in read_jsonl(lane / "events.jsonl")]
    assert sorted(e["itemId"] for e in merged if e["type"] == "lane_merged") == ["a", "b", "c"]
    events = read_jsonl(parent / "events.jsonl")
    assert (events[-1]["type"], events[-1]["reason"]) == ("complete", "backlog_done")
    ended = [e["laneRun"] for e in events if e["type"] == "lane" and e["state"] == "ended"]
    assert sorted(ended) == [lane.name for lane in lanes]
    state = json.loads((parent / "state.json").read_text())
    assert state["parallel"]["lanes"] == [lane.name for lane in lanes]
    assert state["spend"]["iterations"] == 3  # every lane's spend, together

    status = run_cli(["status", parent.name], cwd=repo)
    assert status.returncode == 0, status.stderr
    for number, lane in enumerate(lanes, start=1):
        assert f"lane {number}     {lane.name}  ended (backlog_done)" in status.stdout

    merge = run_cli(["merge", parent.name], cwd=repo)
    assert merge.returncode == 0, merge.stderr
    assert all((repo / name).exists() for name in ("a.md", "b.md", "c.md"))


def test_an_item_whose_merge_conflicts_is_reopened_then_lands(tmp_path: Path, repo: Path) -> None:
    tasks = _backlog(repo, _item("a", "same.md"), _item("b", "same.md"))
    env = {"AUTOPILOT_DEMO_DELAY": "0.3"}  # both agents work at once
    done = run_cli(["run", "--backlog", "--parallel", "2", "--agent", "demo"], cwd=repo, env=env)

    assert done.returncode == 0, done.stdout + done.stderr
    parent, lanes = _runs(tmp_path)
    events = [e for lane in lanes for e in read_jsonl(lane / "events.jsonl")]
    conflicts = [e for e in events if e["type"] == "merge_conflict"]
    assert len(conflicts) == 1 and conflicts[0]["files"] == ["same.md"]
    loser = conflicts[0]["itemId"]
    reopened = [
        e for e in events if e["type"] == "workitem_end" and e["decision"] == "merge_conflict"
    ]
    assert [(e["itemId"], e["status"]) for e in reopened] == [(loser, "reopened")]
    recorded = [
        e["item"]["completion"]["evidence"]
        for e in events
        if e["type"] == "workitem_recorded" and e["item"]["status"] == "reopened"
    ]
    assert recorded and "conflicted in: same.md" in recorded[0][-1]
    items = _items(tasks)
    assert (items[loser]["status"], items[loser]["attempt"]) == ("completed", 2)
    branch = f"autopilot/{parent.name}"
    assert f"item {loser}." in git(repo, "show", f"{branch}:same.md")


def test_pause_resume_off_and_stop_reach_every_agent(tmp_path: Path, repo: Path) -> None:
    _backlog(repo, *(_item(name, f"{name}.md") for name in "abcdef"))
    env = {"AUTOPILOT_DEMO_DELAY": "0.5"}
    args = ["run", "--backlog", "--parallel", "3", "--agent", "demo", "--detach"]
    started = run_cli([*args, "--max-iterations", "4"], cwd=repo, env=env)
    assert started.returncode == 0, started.stderr
    parent, lanes = _runs(tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
        json.loads((lane / "state.json").read_text()).get("pid") for lane in lanes
    ):
        time.sleep(0.05)  # every agent's driver is at work
    lane_state = lambda lane: json.loads((lane / "state.json").read_text())  # noqa: E731
    assert run_cli(["pause", parent.name], cwd=repo).returncode == 0
    assert [lane_state(lane)["paused"] for lane in lanes] == [True, True, True]
    assert run_cli(["resume", parent.name], cwd=repo).returncode == 0
    assert [lane_state(lane)["paused"] for lane in lanes] == [False, False, False]
    off = run_cli(["off"], cwd=repo)  # the OFF switch of the checkout holds every agent
    assert off.returncode == 0, off.stderr
    pauses = lambda lane: [  # noqa: E731
        e for e in read_jsonl(lane / "events.jsonl") if e["type"] == "pause"
    ]
    # A lane's state.json says paused a moment before its log has the pause event.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not all(
        lane_state(lane)["status"] == "paused" and "OFF" in str(pauses(lane)[-1:]) for lane in lanes
    ):
        time.sleep(0.1)
    assert [lane_state(lane)["status"] for lane in lanes] == ["paused"] * 3
    for lane in lanes:
        assert "OFF" in pauses(lane)[-1]["note"], pauses(lane)
    stopped = run_cli(["stop", parent.name], cwd=repo)
    assert stopped.returncode == 0, stopped.stderr
    assert f"{parent.name}: stop requested; its 3 agents stop at the next boundary" in (
        stopped.stdout
    )

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = json.loads((parent / "state.json").read_text())
        if state.get("terminated"):
            break
        time.sleep(0.2)
    states = [json.loads((lane / "state.json").read_text()) for lane in lanes]
    assert all(s["terminated"] and s["terminationReason"] == "user_stopped" for s in states)
    assert sum(s["spend"]["iterations"] for s in states) <= 3  # one iteration each at most
    assert state["terminated"] and state["terminationReason"] == "user_stopped"
    assert "Traceback" not in (parent / "events.jsonl").read_text()


def test_a_budget_holds_across_every_agent(tmp_path: Path, repo: Path) -> None:
    _backlog(repo, *(_item(name, f"{name}.md") for name in "abcdef"))
    args = ["run", "--backlog", "--parallel", "2", "--agent", "demo", "--max-iterations", "3"]
    done = run_cli(args, cwd=repo, env=DEMO)

    assert done.returncode == 3, done.stdout + done.stderr
    parent, lanes = _runs(tmp_path)
    spent = [json.loads((lane / "state.json").read_text())["spend"] for lane in lanes]
    # Each agent reserves its iteration against all the spend and every other
    # agent's iteration in flight before it starts one: the budget is exact.
    assert sum(s["iterations"] for s in spent) == 3
    events = read_jsonl(parent / "events.jsonl")
    assert (events[-1]["type"], events[-1]["reason"]) == ("abort", "max_iterations")


def test_parallel_bad_input_is_one_line(tmp_path: Path, repo: Path) -> None:
    _backlog(repo, _item("a", "a.md"))
    plain = tmp_path / "plain"
    plain.mkdir()
    _backlog(plain, _item("a", "a.md"))
    cases = [
        (["--backlog", "--parallel", "0"], repo, "--parallel takes a number of agents of 1"),
        (["--backlog", "--parallel", "two"], repo, "--parallel takes a number of agents of 1"),
        (["-p", "x", "--parallel", "2"], repo, "--parallel goes with --backlog"),
        (["--backlog", "--parallel", "2", "--no-worktree"], repo, "drop --no-worktree"),
        (["--backlog", "--parallel", "2"], plain, "is not in a git repository"),
    ]
    for args, where, words in cases:
        done = run_cli(["run", "--agent", "demo", *args], cwd=where, env=DEMO)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.count("\n") == 1 and words in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert not [p for p in (tmp_path / "runs").iterdir() if p.name.startswith("repo-")]

    _backlog(repo, _item("a", "a.md", status="completed"))
    nothing = run_cli(["run", "--agent", "demo", "--backlog", "--parallel", "2"], cwd=repo)
    assert nothing.returncode == 2
    assert nothing.stderr.strip().endswith("is ready to start (autopilot tasks list)")


def test_more_agents_than_ready_items_start_as_many_as_there_are_items(
    tmp_path: Path, repo: Path
) -> None:
    _backlog(repo, _item("a", "a.md"), _item("b", "b.md", depends_on=["a"]))
    done = run_cli(["run", "--backlog", "--parallel", "3", "--agent", "demo"], cwd=repo, env=DEMO)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "autopilot: 3 agents asked for but 1 work item is ready: starting 1\n" in done.stderr
    _, lanes = _runs(tmp_path)
    assert len(lanes) == 1


def test_a_crashed_agent_is_restarted_and_no_work_is_lost(tmp_path: Path, repo: Path) -> None:
    tasks = _backlog(repo, *(_item(name, f"{name}.md") for name in "abcd"))
    env = {"AUTOPILOT_DEMO_DELAY": "0.4"}
    args = ["run", "--backlog", "--parallel", "2", "--agent", "demo", "--detach"]
    started = run_cli(args, cwd=repo, env=env)
    assert started.returncode == 0, started.stderr
    parent, lanes = _runs(tmp_path)
    victim = lanes[0] / "state.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = json.loads(victim.read_text())
        if state.get("agentPid") and state.get("pid"):
            break
        time.sleep(0.05)
    os.kill(state["pid"], signal.SIGKILL)  # the lane's driver dies mid-iteration

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if json.loads((parent / "state.json").read_text()).get("terminated"):
            break
        time.sleep(0.2)
    events = read_jsonl(parent / "events.jsonl")
    assert (events[-1]["type"], events[-1]["reason"]) == ("complete", "backlog_done")
    assert {item["status"] for item in _items(tasks).values()} == {"completed"}
    restarts = [
        e for e in read_jsonl(lanes[0] / "events.jsonl") if e["type"] == "supervisor_restart"
    ]
    assert restarts
    names = set(git(repo, "ls-tree", "--name-only", f"autopilot/{parent.name}").split())
    assert {"a.md", "b.md", "c.md", "d.md"} <= names


def test_a_second_ctrl_c_stops_every_agent_now(tmp_path: Path, repo: Path) -> None:
    _backlog(repo, _item("a", "a.md"), _item("b", "b.md"))
    env = dict(os.environ, AUTOPILOT_DEMO_DELAY="600")  # each agent sleeps mid-item
    args = ["run", "--backlog", "--parallel", "2", "--agent", "demo"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "autopilot", *args],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        lanes: list[Path] = []
        while time.monotonic() < deadline:
            runs = tmp_path / "runs"
            lanes = sorted(runs.glob("repo-*-lane*")) if runs.exists() else []
            states = [json.loads((lane / "state.json").read_text()) for lane in lanes]
            if len(lanes) == 2 and all(s.get("agentPid") for s in states):
                break
            time.sleep(0.1)
        agents = [json.loads((lane / "state.json").read_text())["agentPid"] for lane in lanes]
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, said = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
            parent, _ = _runs(tmp_path)
            run_cli(["stop", "--now", parent.name], cwd=repo)
    assert proc.returncode == 130
    assert "Ctrl-C again to stop them now" in said and "stopping every agent now" in said
    parent, lanes = _runs(tmp_path)
    for lane in lanes:
        ends = [e for e in read_jsonl(lane / "events.jsonl") if e["type"] == "iteration_end"]
        assert [e["outcome"] for e in ends] == ["killed"], lane
    for pid in agents:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    events = read_jsonl(parent / "events.jsonl")
    assert (events[-1]["type"], events[-1]["reason"]) == ("abort", "user_stopped")


FORGER = r"""#!{python}
import json, re, subprocess, sys
item = re.search(r"item (\w+)\.", sys.stdin.read()).group(1)
tasks = {tasks!r}
if item == "a":  # completes the other items by writing the checkout's tasks.jsonl
    items = [json.loads(line) for line in open(tasks) if line.strip()]
    for other in items:
        if other["id"] != "a":
            other["status"] = "completed"
            other["completion"] = {{"state": "passed", "verdict": "pass", "evidence": ["ok"],
                "completion_check_digest": "sha256:" + "0" * 64, "reopen_target": None}}
    open(tasks, "w").write("".join(json.dumps(i) + "\n" for i in items))
open(item + ".txt", "w").write(item)
subprocess.run([sys.executable, "-m", "autopilot", "report", "continue_next", "--item", item,
                "--criterion", "ac1=pass", "--evidence", "ok"], check=True)
print("did " + item)
"""


def test_an_agent_cannot_complete_other_lanes_items_by_writing_the_file(
    tmp_path: Path, repo: Path
) -> None:
    tasks = _backlog(
        repo,
        _item("a", "a.txt"),
        _item("b", "b.txt", depends_on=["a"]),
        _item("c", "c.txt", depends_on=["a"]),
    )
    agent = tmp_path / "forger.py"
    agent.write_text(FORGER.format(python=sys.executable, tasks=str(tasks)))
    agent.chmod(0o755)
    git(repo, "add", ".autopilot")
    git(repo, "commit", "-qm", "backlog")
    args = ["run", "--backlog", "--parallel", "2", "--agent", "command"]
    done = run_cli([*args, "--max-iterations", "6", "--plain", "--", str(agent)], cwd=repo)

    assert done.returncode == 0, done.stdout + done.stderr
    parent, lanes = _runs(tmp_path)
    events = [e for lane in lanes for e in read_jsonl(lane / "events.jsonl")]
    undone = [e["note"] for e in events if e["type"] == "warning" and "undone" in e["note"]]
    assert undone and undone[0].startswith("work items b, c were changed while the agent worked")
    assert sorted(e["itemId"] for e in events if e["type"] == "lane_merged") == ["a", "b", "c"]
    branch = f"autopilot/{parent.name}"
    assert {"a.txt", "b.txt", "c.txt"} <= set(git(repo, "ls-tree", "--name-only", branch).split())
    assert any(e["type"] == "backlog_verified" for e in events)
    final = read_jsonl(parent / "events.jsonl")[-1]
    assert (final["type"], final["reason"]) == ("complete", "backlog_done")
