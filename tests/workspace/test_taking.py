"""Checkpoints as the driver takes them: off outside a repository, said once; a git
failure is a warning, never an error, and the next iteration tries again."""

from __future__ import annotations

from pathlib import Path

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
