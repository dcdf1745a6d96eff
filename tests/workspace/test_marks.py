"""GitWorkspace, the driver's seam to the work tree, against real git: HEAD moves,
checkpoints once per name, and a work tree that disappears."""

from __future__ import annotations

import shutil
from pathlib import Path

from autopilot.workspace.history import HeadMoveKind
from autopilot.workspace.marks import GitWorkspace
from tests.workspace.gitstate import git, make_repo


def test_head_moves_are_facts_and_commits_on_the_branch_are_not(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    workspace = GitWorkspace(repo)
    start = workspace.mark()
    assert start.branch == git(repo, "symbolic-ref", "--short", "HEAD").strip()
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "a")
    committed = workspace.mark()
    assert workspace.head_move(start, committed) is None
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    rewound = workspace.mark()
    move = workspace.head_move(committed, rewound)
    assert move is not None and (move.kind, move.dropped) == (HeadMoveKind.REWOUND, 1)
    git(repo, "checkout", "-q", "--detach")
    detached = workspace.mark()
    move = workspace.head_move(rewound, detached)
    assert move is not None and (move.kind, move.to_branch) == (HeadMoveKind.SWITCHED, None)


def test_checkpoints_a_baseline_once_then_each_iteration(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_dir = tmp_path / "runs" / "repo-1"
    run_dir.mkdir(parents=True)
    workspace = GitWorkspace(repo, run_dir)
    baseline = workspace.checkpoint(0)
    assert baseline is not None and baseline.name == "baseline"
    (repo / "b.txt").write_text("b\n")
    first = workspace.checkpoint(1)
    assert first is not None and (first.name, first.files) == ("iter-0001", ("A b.txt",))
    # A relaunched driver keeps the run's first baseline.
    assert GitWorkspace(repo, run_dir).checkpoint(0) is None
    assert workspace.problem() is None
    assert GitWorkspace(repo).checkpoint(1) is None  # no run folder: no checkpoints


def test_outside_a_repository_and_a_deleted_work_tree(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    workspace = GitWorkspace(plain, tmp_path / "run")
    assert workspace.checkpoint(0) is None and workspace.problem() is None
    assert workspace.gone() is None
    shutil.rmtree(plain)
    assert workspace.gone() == (
        f"the work tree {plain} no longer exists (deleted while the run ran)"
    )
    assert workspace.checkpoint(1) is None
