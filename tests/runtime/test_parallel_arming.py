"""A parallel run whose lane cannot be armed (here: its branch exists already) ends at
once: one ``abort`` for it and for each lane armed before, their worktrees and
branches removed, the user's own branch untouched, nothing left running or open."""

from __future__ import annotations

from pathlib import Path

import pytest

from autopilot.config import RunConfig
from autopilot.errors import RepositoryError
from autopilot.runtime.parallel import arm_parallel
from autopilot.store.run_state import PromptSource
from tests.conftest import read_jsonl
from tests.fakes import START_MS, FakeClock
from tests.workspace.gitstate import git, make_repo


def test_a_lane_that_cannot_be_armed_ends_the_parallel_run_and_cleans_up(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    root = tmp_path / "runs"
    root.mkdir()
    config = RunConfig(agent="demo", label="repo")
    # The second lane's branch is the user's already: its arming fails.
    taken = f"autopilot/repo-lane2-{START_MS}"
    git(repo, "branch", taken)
    before_branches = git(repo, "branch", "--list", "--format=%(refname)")

    with pytest.raises(RepositoryError):
        arm_parallel(root, config, PromptSource(text="backlog"), repo, FakeClock(), lanes=3)

    parent, first = root / f"repo-{START_MS}", root / f"repo-lane1-{START_MS}"
    for folder in (parent, first):
        ends = [
            e for e in read_jsonl(folder / "events.jsonl") if e["type"] in ("abort", "complete")
        ]
        assert [(e["type"], e["reason"]) for e in ends] == [("abort", "internal_error")]
        assert "agent 2 of 3 could not be armed" in ends[0]["note"]
    assert not (root / f"repo-lane2-{START_MS}").exists()
    assert not (root / f"repo-lane3-{START_MS}").exists()
    # Only the checkout itself is left as a worktree, and only the user's branches.
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "branch", "--list", "--format=%(refname)") == before_branches
    assert taken in before_branches
