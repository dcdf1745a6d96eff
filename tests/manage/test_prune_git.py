"""``autopilot prune`` and git: worktrees and checkpoint refs go with their runs;
branches only with ``--branches`` and only once merged; unsaved work keeps its run."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from autopilot.manage.doctor import check_worktrees
from autopilot.workspace.repo import open_repository
from autopilot.workspace.run_workspace import checkpoints_of
from autopilot.workspace.worktrees import create_worktree
from tests.conftest import run_cli
from tests.manage.runs import DAY_MS, make_run, now_ms
from tests.workspace.gitstate import git, make_repo


def worktree_run(tmp_path: Path, repo: Path, label: str, started_ms: int) -> tuple[str, Path]:
    """An ended, old run that worked in its own worktree and committed ``<label>.txt``."""
    run_id = f"{label}-{started_ms}"
    made, _ = create_worktree(
        open_repository(repo), tmp_path / "runs" / "worktrees" / run_id, run_id
    )
    (made.path / f"{label}.txt").write_text(f"{label}\n")
    git(made.path, "add", "-A")
    git(made.path, "commit", "-q", "-m", label)
    make_run(
        tmp_path / "runs",
        label,
        started_ms,
        terminal=("complete", "completion_promise"),
        state={"cwd": str(made.path), "worktree": made.to_json()},
    )
    checkpoints_of(tmp_path / "runs" / run_id, open_repository(made.path)).take_baseline()
    return run_id, made.path


def refs(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname)").split()


def test_prune_removes_worktrees_refs_and_merged_branches(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    old = now_ms() - 40 * DAY_MS
    merged, merged_path = worktree_run(tmp_path, repo, "merged", old)
    squashed, _ = worktree_run(tmp_path, repo, "squashed", old + 1)
    unmerged, unmerged_path = worktree_run(tmp_path, repo, "unmerged", old + 2)
    unsaved, unsaved_path = worktree_run(tmp_path, repo, "unsaved", old + 3)
    (unsaved_path / "draft.txt").write_text("not committed\n")
    plain = make_run(
        tmp_path / "runs",
        "plain",
        old + 4,
        terminal=("abort", "max_iterations"),
        state={"cwd": str(repo)},
    )
    checkpoints_of(tmp_path / "runs" / plain, open_repository(repo)).take_baseline()
    git(repo, "merge", "-q", "--ff-only", f"autopilot/{merged}")
    squash = run_cli(["merge", squashed, "--squash"], cwd=repo)
    assert squash.returncode == 0, squash.stderr
    state_path = tmp_path / "runs" / squashed / "state.json"
    assert json.loads(state_path.read_text())["merge"]["mode"] == "squash"
    os.utime(state_path, (old / 1000, old / 1000))

    done = run_cli(["prune", "--older-than", "30d", "--branches"], cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"kept     {unsaved}  (its worktree {unsaved_path} has 1 uncommitted file(s))" in (
        done.stdout
    )
    assert f"{unmerged}: branch autopilot/{unmerged} was kept: it has commits" in done.stdout
    assert f"{merged}: deleted branch autopilot/{merged}" in done.stdout
    assert f"{squashed}: deleted branch autopilot/{squashed}" in done.stdout
    assert f"{plain}: deleted 1 checkpoint refs in {repo}" in done.stdout
    assert not merged_path.exists() and not unmerged_path.exists()
    assert (unsaved_path / "draft.txt").read_text() == "not committed\n"
    assert refs(repo) == [
        f"refs/autopilot/{unsaved}/baseline",
        f"refs/heads/autopilot/{unmerged}",
        f"refs/heads/autopilot/{unsaved}",
        "refs/heads/main",
    ]
    assert sorted(
        p.name for p in (tmp_path / "runs").iterdir() if p.name.endswith(tuple("0123456789"))
    ) == [unsaved]


def test_prune_without_branches_keeps_every_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id, path = worktree_run(tmp_path, repo, "run", now_ms() - 40 * DAY_MS)
    git(repo, "merge", "-q", "--ff-only", f"autopilot/{run_id}")
    done = run_cli(["prune", "--older-than", "30d"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{run_id}: removed worktree {path}" in done.stdout
    assert refs(repo) == [f"refs/heads/autopilot/{run_id}", "refs/heads/main"]


def test_doctor_reports_stranded_worktrees_and_branches(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    old = now_ms() - 40 * DAY_MS
    kept, _ = worktree_run(tmp_path, repo, "kept", old)
    stranded, stranded_path = worktree_run(tmp_path, repo, "stranded", old + 1)
    shutil.rmtree(tmp_path / "runs" / stranded)  # its run went, its worktree stayed
    vanished, vanished_path = worktree_run(tmp_path, repo, "vanished", old + 2)
    shutil.rmtree(vanished_path)  # its worktree went, its run stayed

    findings = check_worktrees(tmp_path / "runs", repo)

    assert [(f.level.value, f.detail.split(" (")[0]) for f in findings] == [
        ("fail", f"worktree {stranded_path} belongs to no run"),
        ("note", f"worktree {vanished_path} of autopilot/{vanished} is gone"),
        ("note", f"branch autopilot/{stranded} in {repo}: its run is gone"),
    ]
    assert kept not in " ".join(f.detail for f in findings)
    done = run_cli(["doctor"], cwd=repo)
    assert f"fail  worktrees        worktree {stranded_path} belongs to no run" in done.stdout


def test_autopilots_own_files_in_a_worktree_are_not_unsaved_work(tmp_path: Path) -> None:
    """The memory file (and any ``.autopilot/`` folder) never keeps a worktree run;
    the user's own uncommitted file does, and is counted alone."""
    repo = make_repo(tmp_path / "repo")
    old = now_ms() - 40 * DAY_MS
    done_run, done_path = worktree_run(tmp_path, repo, "done", old)
    draft_run, draft_path = worktree_run(tmp_path, repo, "draft", old + 1)
    for path in (done_path, draft_path):
        (path / ".autopilot").mkdir()
        (path / ".autopilot" / "memory.md").write_text("# Memory\n")
        (path / "sub" / ".autopilot").mkdir(parents=True)
        (path / "sub" / ".autopilot" / "OFF").write_text("")
    (draft_path / "draft.txt").write_text("not committed\n")

    done = run_cli(["prune", "--older-than", "30d"], cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{done_run}: removed worktree {done_path}" in done.stdout
    assert not done_path.exists()
    assert f"kept     {draft_run}  (its worktree {draft_path} has 1 uncommitted file(s))" in (
        done.stdout
    )
    assert (draft_path / "draft.txt").read_text() == "not committed\n"
