"""A recorded run's workspace: its repository, checkpoints and branch, from its state.

What the ``checkpoints``, ``diff``, ``restore``, ``merge`` and ``prune`` commands act
on. A run worked in ``state.json``'s ``cwd``; a ``--worktree`` run also records
``worktree`` (``RunWorktree.to_json``: ``path``, ``branch``, ``base``, ``origin``), and
``autopilot merge`` records ``merge`` (``branch``, ``tip``, ``into``, ``after``,
``mode``). The run's own checkpoint index is ``checkpoint.index`` in its folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msgspec import Struct

from autopilot.errors import RepositoryError
from autopilot.store.rundir import RunDir
from autopilot.workspace.checkpoints import Checkpoints
from autopilot.workspace.repo import Repository, open_repository
from autopilot.workspace.worktrees import RunWorktree

CHECKPOINT_INDEX = "checkpoint.index"
"""The run's temporary index for checkpoints, in its folder."""


def checkpoints_of(run_dir: Path, repo: Repository) -> Checkpoints:
    """The checkpoints of the run in ``run_dir``, in ``repo`` (an iteration that shared
    an earlier checkpoint found through the run's log)."""
    return Checkpoints(repo, run_dir.name, run_dir / CHECKPOINT_INDEX, RunDir(run_dir).events)


class RunPlace(Struct, frozen=True):
    """Where a run worked, as its ``state.json`` records it.

    Attributes:
        cwd: The directory the agent ran in (for a worktree run, the worktree).
        worktree: The run's worktree, if it had one.
        merged_tip: The branch commit ``autopilot merge`` last merged, if any.
    """

    cwd: str | None
    worktree: RunWorktree | None
    merged_tip: str | None

    @classmethod
    def from_state_json(cls, data: Mapping[str, Any]) -> RunPlace:
        """From ``state.json``'s fields; malformed ones count as absent."""
        cwd = data.get("cwd")
        merge = data.get("merge")
        tip = merge.get("tip") if isinstance(merge, dict) else None
        return cls(
            cwd if isinstance(cwd, str) and cwd else None,
            RunWorktree.from_json(data.get("worktree")),
            tip if isinstance(tip, str) else None,
        )


class RunWorkspace(Struct, frozen=True):
    """Where a recorded run worked, opened.

    Attributes:
        run_id: The run.
        repo: The work tree it worked in (its worktree for a ``--worktree`` run).
        checkpoints: Its checkpoints.
        worktree: Its worktree record, if it ran in one.
    """

    run_id: str
    repo: Repository
    checkpoints: Checkpoints
    worktree: RunWorktree | None


def open_run_workspace(run_dir: Path, place: RunPlace) -> RunWorkspace:
    """The workspace of the run whose folder is ``run_dir``.

    Raises:
        RepositoryError: the run's directory is gone or is not in a git repository.
        GitUnavailableError: git is missing.
    """
    run_id = run_dir.name
    cwd = str(place.worktree.path) if place.worktree else place.cwd
    if cwd is None:
        raise RepositoryError(f"run {run_id} recorded no working directory")
    try:
        repo = open_repository(Path(cwd))
    except RepositoryError as error:
        raise RepositoryError(f"run {run_id} worked in {cwd}: {error}") from None
    return RunWorkspace(run_id, repo, checkpoints_of(run_dir, repo), place.worktree)
