"""A lane's completed item landed in the run branch with real git: merged one at a
time, or, on a conflict, nothing changed on the run branch, the files named, and the
lane's work kept under a ref."""

from __future__ import annotations

from pathlib import Path

from autopilot.workspace.landing import land
from autopilot.workspace.repo import open_repository
from autopilot.workspace.worktrees import create_worktree
from tests.workspace.gitstate import git, make_repo


def _run_and_lanes(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    repo = make_repo(tmp_path / "repo")
    origin = open_repository(repo)
    run, _ = create_worktree(origin, tmp_path / "wt" / "run", "run")
    lanes = [
        create_worktree(origin, tmp_path / "wt" / name, name, start=run.branch)[0].path
        for name in ("lane-1", "lane-2")
    ]
    return repo, run.path, lanes[0], lanes[1]


def _land(lane: Path, run: Path, tmp_path: Path, item: str) -> tuple[str | None, tuple[str, ...]]:
    merged = land(
        open_repository(lane),
        open_repository(run),
        tmp_path / "merge.lock",
        lane_run_id=lane.name,
        item_id=item,
        attempt=1,
    )
    return merged.sha, merged.conflicts


def test_two_lanes_land_one_after_the_other(tmp_path: Path) -> None:
    repo, run, one, two = _run_and_lanes(tmp_path)
    (one / "a.txt").write_text("a\n")  # not committed by the agent: autopilot commits it
    (one / ".autopilot").mkdir()
    (one / ".autopilot" / "memory.md").write_text("the lane's own notes\n")
    (one / "sub" / ".autopilot").mkdir(parents=True)  # a sub-project's run files
    (one / "sub" / ".autopilot" / "OFF").write_text("")
    (one / "sub" / "code.txt").write_text("code\n")
    (two / "b.txt").write_text("b\n")
    git(two, "add", "b.txt")
    git(two, "commit", "-q", "-m", "the agent's own commit")

    first, none = _land(one, run, tmp_path, "a")
    second, still_none = _land(two, run, tmp_path, "b")

    assert none == still_none == ()
    assert git(run, "rev-parse", "HEAD").strip() == second
    assert {"a.txt", "b.txt"} <= set(git(run, "ls-files").split())
    assert ".autopilot/memory.md" not in git(run, "ls-files")
    assert "sub/code.txt" in git(run, "ls-files").split()
    assert "sub/.autopilot/OFF" not in git(run, "ls-files")
    subjects = git(run, "log", "--format=%s", "--first-parent").splitlines()
    assert subjects[:2] == [
        "autopilot: merge work item b (lane-2)",
        "autopilot: merge work item a (lane-1)",
    ]
    # Each lane goes on from the run branch as it was after its landing.
    assert git(one, "rev-parse", "HEAD").strip() == first
    assert git(two, "rev-parse", "HEAD").strip() == second
    assert (one / ".autopilot" / "memory.md").exists()  # kept, never committed
    assert git(repo, "status", "--porcelain") == ""


def test_a_conflicting_lane_leaves_the_run_branch_as_it_was(tmp_path: Path) -> None:
    _, run, one, two = _run_and_lanes(tmp_path)
    (one / "same.txt").write_text("from lane 1\n")
    (two / "same.txt").write_text("from lane 2\n")
    (two / "other.txt").write_text("more\n")
    merged, _ = _land(one, run, tmp_path, "a")
    lane_work = git(two, "rev-parse", "HEAD").strip()

    sha, conflicts = _land(two, run, tmp_path, "b")

    assert (sha, conflicts) == (None, ("same.txt",))
    assert git(run, "rev-parse", "HEAD").strip() == merged
    assert git(run, "status", "--porcelain") == ""
    kept = git(two, "rev-parse", "refs/autopilot/lane-2/conflict-b-1").strip()
    assert kept != lane_work and git(two, "show", f"{kept}:same.txt") == "from lane 2\n"
    # The lane now holds the run branch's latest work, to do the item again on top.
    assert git(two, "rev-parse", "HEAD").strip() == merged
    assert (two / "same.txt").read_text() == "from lane 1\n"
    assert not (two / "other.txt").exists()
