"""A ``--backlog --worktree`` run's backlog is the user's checkout's ``tasks.jsonl``:
the one queue the user edits, where the run claims items and writes their status,
while the agent works in the run's worktree (the demo agent as a real process)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import read_jsonl, run_cli
from tests.workspace.gitstate import git

ITEM = {
    "id": "notes",
    "prompt": "Write notes.md: The notes.",
    "acceptance_criteria": [{"id": "ac1", "text": "exists", "check": "test -f notes.md"}],
}
DEMO = {"AUTOPILOT_DEMO_DELAY": "0"}


def _run_folder(tmp_path: Path) -> Path:
    return next(p for p in (tmp_path / "runs").iterdir() if p.name.startswith("repo-"))


def test_a_worktree_backlog_run_works_the_checkouts_backlog(tmp_path: Path, repo: Path) -> None:
    (repo / ".autopilot").mkdir()
    tasks = repo / ".autopilot" / "tasks.jsonl"
    tasks.write_text(json.dumps(ITEM) + "\n")  # untracked: the worktree has no copy

    done = run_cli(
        ["run", "--backlog", "--worktree", "--agent", "demo", "--plain"], cwd=repo, env=DEMO
    )

    assert done.returncode == 0, done.stdout + done.stderr
    [item] = [json.loads(line) for line in tasks.read_text().splitlines()]
    assert (item["status"], item["completion"]["verdict"], item["attempt"]) == (
        "completed",
        "pass",
        1,
    )
    folder = _run_folder(tmp_path)
    worktree = tmp_path / "runs" / "worktrees" / folder.name
    assert (worktree / "notes.md").exists()
    assert not (worktree / ".autopilot" / "tasks.jsonl").exists()
    assert not (repo / "notes.md").exists()  # the checkout was not written
    assert "notes.md" in git(repo, "show", "--stat", f"autopilot/{folder.name}")
    # The agent's git add -A committed its work, never autopilot's memory file.
    assert (worktree / ".autopilot" / "memory.md").exists()
    committed = git(repo, "ls-tree", "-r", "--name-only", f"autopilot/{folder.name}").split()
    assert not [path for path in committed if path.startswith(".autopilot/")]
    assert git(worktree, "status", "--porcelain", "--untracked-files=all") == ""
    events = read_jsonl(folder / "events.jsonl")
    assert [e["itemId"] for e in events if e["type"] == "workitem_start"] == ["notes"]
    assert (events[-1]["type"], events[-1]["reason"]) == ("complete", "backlog_done")


def test_a_worktree_backlog_run_honours_the_checkouts_approved_boundary(
    tmp_path: Path, repo: Path
) -> None:
    (repo / ".autopilot").mkdir()
    (repo / ".autopilot" / "tasks.jsonl").write_text(json.dumps(ITEM) + "\n")
    args = ["run", "--backlog", "--worktree", "--agent", "demo", "--plain"]

    done = run_cli(
        [*args, "--max-iterations", "1", "--approve", "--surface", "docs/..."], cwd=repo, env=DEMO
    )

    assert done.returncode == 3, done.stdout + done.stderr
    events = read_jsonl(_run_folder(tmp_path) / "events.jsonl")
    violations = [e["paths"] for e in events if e["type"] == "surface_violation"]
    assert violations == [["notes.md"]]
    boundary = json.loads((repo / ".autopilot" / "approved-run.json").read_text())
    assert boundary["budget"]["remaining_steps"] == 0
