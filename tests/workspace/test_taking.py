"""Checkpoints as the driver takes them: off outside a repository, said once; a git
failure is a warning, never an error, and the next iteration tries again."""

from __future__ import annotations

from pathlib import Path

import pytest

from autopilot.core.structs import replace
from autopilot.workspace.checkpoint_facts import Taken
from autopilot.workspace.checkpoints import Checkpoints
from autopilot.workspace.taking import RunCheckpointer
from tests.workspace.gitstate import git, make_repo


def test_baseline_once_then_one_per_iteration(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_dir = tmp_path / "runs" / "work-1796000000000"
    (repo / "dirty.txt").write_text("uncommitted\n")
    taker = RunCheckpointer(repo, run_dir)
    baseline = taker.baseline()
    assert baseline is not None
    assert baseline.event_fields() == {
        "iteration": 0,
        "name": "baseline",
        "sha": git(repo, "rev-parse", "refs/autopilot/work-1796000000000/baseline").strip(),
        "filesChanged": 1,
        "files": ["A dirty.txt"],
    }
    assert RunCheckpointer(repo, run_dir).baseline() is None  # a relaunch keeps the first
    for number in range(60):
        (repo / f"f{number:02d}.txt").write_text("x\n")
    first = taker.after_iteration(1)
    assert first is not None and first.files_changed == 60 and len(first.files) == 50
    assert taker.warning() is None


def test_outside_a_repository_and_when_off(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    taker = RunCheckpointer(plain, tmp_path / "run")
    assert not taker.active
    assert taker.warning() == f"no checkpoints: {plain} is not in a git repository"
    assert taker.warning() is None
    assert taker.baseline() is None and taker.after_iteration(1) is None
    off = RunCheckpointer(make_repo(tmp_path / "repo"), tmp_path / "run", enabled=False)
    assert not off.active and off.warning() is None and off.after_iteration(1) is None


def test_a_git_failure_is_said_once_and_retried(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_dir = tmp_path / "run"
    taker = RunCheckpointer(repo, run_dir)
    taker.baseline()
    lock = run_dir / "checkpoint.index.lock"  # as a git that crashed would leave it
    lock.write_text("")
    (repo / "new.txt").write_text("new\n")
    assert taker.after_iteration(1) is None
    assert taker.after_iteration(2) is None
    warning = taker.warning()
    assert warning is not None and warning.startswith("checkpoint failed: git ")
    assert "checkpoint.index.lock" in warning
    assert taker.warning() is None
    lock.unlink()
    recovered = taker.after_iteration(3)
    assert recovered is not None and recovered.files == ("A new.txt",)
    assert taker.warning() is None


def test_an_unchanged_tree_shares_the_previous_checkpoint(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_dir = tmp_path / "runs" / "work-1796000000000"
    taker = RunCheckpointer(repo, run_dir)
    taker.baseline()
    first = taker.after_iteration(1, tree_key="k1")
    assert first is not None and first.name == "iter-0001"
    shared = taker.after_iteration(2, tree_key="k1")
    assert shared is not None
    assert shared.event_fields() == {
        "iteration": 2,
        "name": "iter-0001",
        "sha": first.sha,
        "filesChanged": 0,
        "files": [],
    }
    refs = git(repo, "for-each-ref", "--format=%(refname:lstrip=3)", "refs/autopilot/")
    assert refs.split() == ["baseline", "iter-0001"]  # no commit of the same tree
    (repo / "new.txt").write_text("new\n")
    third = taker.after_iteration(3, tree_key="k3")
    assert third is not None and (third.name, third.files) == ("iter-0003", ("A new.txt",))
    unknown = taker.after_iteration(4, tree_key=None)  # a mark that cannot vouch
    assert unknown is not None and unknown.name == "iter-0004"
    fifth = taker.after_iteration(5, tree_key=None)
    assert fifth is not None and fifth.name == "iter-0005"
    # A relaunched driver takes its first checkpoint whatever the key.
    again = RunCheckpointer(repo, run_dir).after_iteration(6, tree_key="k3")
    assert again is not None and again.name == "iter-0006"


def test_a_checkpoint_that_left_files_out_or_failed_is_not_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    run_dir = tmp_path / "run"
    taker = RunCheckpointer(repo, run_dir)
    taker.baseline()
    taking = Checkpoints.take_iteration

    def leaving_one_out(store: Checkpoints, iteration: int, head: str | None = None) -> Taken:
        return replace(taking(store, iteration, head), warning="could not open 'secret.txt'")

    monkeypatch.setattr(Checkpoints, "take_iteration", leaving_one_out)
    left_out = taker.after_iteration(1, tree_key="k")
    assert left_out is not None and left_out.warning is not None
    monkeypatch.undo()
    again = taker.after_iteration(2, tree_key="k")
    assert again is not None and again.name == "iter-0002"
    lock = run_dir / "checkpoint.index.lock"
    lock.write_text("")
    assert taker.after_iteration(3, tree_key="k3") is None
    lock.unlink()
    assert taker.warning() is not None
    retried = taker.after_iteration(4, tree_key="k3")
    assert retried is not None and retried.name == "iter-0004"
