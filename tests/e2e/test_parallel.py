"""A parallel backlog run with the real Claude Code CLI (2.1.197), offline: two agents
at once, each in its own worktree, each reporting through ``autopilot report`` with
its shell tool; autopilot checks each item and merges it into the run branch."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import git, read_jsonl
from tests.e2e.clis import CLIS
from tests.e2e.conftest import assert_nothing_left_behind, cli_path, run_offline

ITEMS = [
    {
        "id": "alpha",
        "prompt": "Create alpha.txt holding the word alpha.",
        "acceptance_criteria": [
            {"id": "ac1", "text": "alpha.txt says alpha", "check": "grep -qx alpha alpha.txt"}
        ],
    },
    {
        "id": "gamma",
        "prompt": "Create gamma.txt holding the word gamma.",
        "acceptance_criteria": [
            {"id": "ac1", "text": "gamma.txt says gamma", "check": "grep -qx gamma gamma.txt"}
        ],
    },
]


@pytest.mark.timeout(900)
def test_two_claude_agents_drain_two_items_into_the_run_branch(
    tmp_path: Path, e2e_repo: Path
) -> None:
    tasks = e2e_repo / ".autopilot" / "tasks.jsonl"
    tasks.parent.mkdir()
    tasks.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    setup = CLIS["claude"].setup(tmp_path)
    env = {"AUTOPILOT_CLAUDE_BIN": str(cli_path("claude")), **setup.set_env}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    args = ["run", "--backlog", "--parallel", "2", "--agent", "claude", "--max-iterations", "6"]
    run = run_offline(
        tmp_path,
        e2e_repo,
        script="backlog",
        autopilot_args=[*args, "--iteration-timeout", "180", "--idle-timeout", "90"],
        set_env=env,
        templates=setup.templates,
        unset_env=setup.unset_env,
        runs_made=3,
    )

    assert run.returncode == 0, run.stdout + run.stderr
    terminal = [(e["type"], e["reason"]) for e in run.events if e["type"] in ("complete", "abort")]
    assert terminal == [("complete", "backlog_done")]
    lanes = sorted(run.state["parallel"]["lanes"])
    assert len(lanes) == 2
    items = [json.loads(line) for line in tasks.read_text().splitlines()]
    assert [(t["id"], t["status"], t["completion"]["verdict"]) for t in items] == [
        ("alpha", "completed", "pass"),
        ("gamma", "completed", "pass"),
    ]
    assert {t["claimed_by"] for t in items} <= set(lanes)
    merged = [
        e["itemId"]
        for lane in lanes
        for e in read_jsonl(run.run_dir.parent / lane / "events.jsonl")
        if e["type"] == "lane_merged"
    ]
    assert sorted(merged) == ["alpha", "gamma"]
    branch = f"autopilot/{run.run_dir.name}"
    assert git(e2e_repo, "show", f"{branch}:alpha.txt") == "alpha\n"
    assert git(e2e_repo, "show", f"{branch}:gamma.txt") == "gamma\n"
    assert not (e2e_repo / "alpha.txt").exists()  # the checkout waits for autopilot merge
    assert_nothing_left_behind(e2e_repo)
