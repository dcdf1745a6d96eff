"""A backlog run with real agent CLIs (Claude Code 2.1.197, Codex 0.171.0), offline.

The scripted model (``backlog`` script) works on three work items and reports each
through ``autopilot report`` with the CLI's own shell tool; autopilot runs each
item's check itself. ``beta``'s check fails on the first attempt, so the item is
reopened once and done on its second attempt.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git
from tests.e2e.clis import CLIS
from tests.e2e.conftest import E2ERun, assert_nothing_left_behind, cli_path, run_offline

ITEMS = [
    {
        "id": "alpha",
        "prompt": "Create alpha.txt holding the word alpha.",
        "acceptance_criteria": [
            {"id": "ac1", "text": "alpha.txt says alpha", "check": "grep -qx alpha alpha.txt"}
        ],
    },
    {
        "id": "beta",
        "prompt": "Create beta.txt holding the word fixed.",
        "depends_on": ["alpha"],
        "acceptance_criteria": [
            {"id": "ac1", "text": "beta.txt says fixed", "check": "grep -qx fixed beta.txt"}
        ],
    },
    {"id": "gamma", "prompt": "Create gamma.txt.", "acceptance_criteria": ["gamma.txt exists"]},
]


def _setup(agent: str, tmp_path: Path) -> tuple[dict[str, str], dict[Path, Path], tuple[str, ...]]:
    setup = CLIS[agent].setup(tmp_path)
    env = {f"AUTOPILOT_{agent.upper()}_BIN": str(cli_path(agent)), **setup.set_env}
    return env, setup.templates, setup.unset_env


def _tasks(repo: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in (repo / ".autopilot" / "tasks.jsonl").read_text().splitlines()
    ]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_backlog_is_drained_with_evidence_checked_by_autopilot(
    agent: str, tmp_path: Path, e2e_repo: Path
) -> None:
    (e2e_repo / ".autopilot").mkdir()
    (e2e_repo / ".autopilot" / "tasks.jsonl").write_text(
        "".join(json.dumps(item) + "\n" for item in ITEMS)
    )
    git(e2e_repo, "add", "-A")
    git(e2e_repo, "commit", "-q", "-m", "backlog")
    env, templates, unset = _setup(agent, tmp_path)
    # The agent's shell finds this autopilot, as a user's finds the installed one; Codex
    # runs a login shell, which takes PATH from the profile.
    bin_dir = Path(sys.executable).parent
    env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    run: E2ERun = run_offline(
        tmp_path,
        e2e_repo,
        script="backlog",
        autopilot_args=[
            "run",
            "--backlog",
            "--agent",
            agent,
            "--max-iterations",
            "8",
            "--iteration-timeout",
            "180",
            "--idle-timeout",
            "90",
        ],
        set_env=env,
        templates=templates,
        unset_env=unset,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    events = run.events
    terminal = [(e["type"], e["reason"]) for e in events if e["type"] in ("complete", "abort")]
    assert terminal == [("complete", "backlog_done")]
    ends = [(e["itemId"], e["status"]) for e in events if e["type"] == "workitem_end"]
    assert ends == [
        ("alpha", "completed"),
        ("beta", "reopened"),
        ("beta", "completed"),
        ("gamma", "completed"),
    ]
    assert [e.get("decision") for e in events if e["type"] == "workitem_end"] == [
        "continue_next"
    ] * 4
    # tasks.jsonl, the events and state.json agree.
    tasks = _tasks(e2e_repo)
    assert [(t["id"], t["status"], t["attempt"]) for t in tasks] == [
        ("alpha", "completed", 1),
        ("beta", "completed", 2),
        ("gamma", "completed", 1),
    ]
    digests = [
        e.get("completionCheckDigest")
        for e in events
        if e["type"] == "workitem_end" and e["status"] == "completed"
    ]
    assert [t["completion"]["completion_check_digest"] for t in tasks] == digests
    assert all(t["completion"]["verdict"] == "pass" for t in tasks)
    assert tasks[1]["completion"]["evidence"][-1] == "[completion-check] ac1: exit 0"
    state = run.state
    assert (state["terminated"], state["terminationReason"], state["status"]) == (
        True,
        "backlog_done",
        "completed",
    )
    assert state["spend"]["iterations"] == 4
    assert (e2e_repo / "beta.txt").read_text() == "fixed\n"
    # The reopened attempt was told why.
    third = (run.run_dir / "iter-0003" / "prompt.md").read_text()
    assert "work-item: beta" in third and "check ac1 ($ grep -qx fixed beta.txt) exit 1" in third
    assert_nothing_left_behind(e2e_repo)
