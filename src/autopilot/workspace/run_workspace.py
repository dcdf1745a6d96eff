"""A recorded run's workspace: its repository, checkpoints and branch, from its state.

What the ``checkpoints``, ``diff``, ``restore`` and ``merge`` commands act on. A run
worked in ``state.json``'s ``cwd``; a ``--worktree`` run also records ``worktree``
(``path``, ``branch``, ``base``, ``origin``: ``RunWorktree.to_json``). The run's own
checkpoint index is ``checkpoint.index`` in its folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autopilot.errors import RepositoryError
from autopilot.workspace.checkpoints import Checkpoints
from autopilot.workspace.repo import Repository, open_repository
from autopilot.workspace.worktrees import branch_for

CHECKPOINT_INDEX = "checkpoint.index"
"""The run's temporary index for checkpoints, in its folder."""


def checkpoints_of(run_dir: Path, repo: Repository) -> Checkpoints:
    """The checkpoints of the run in ``run_dir``, in ``repo``."""
    return Checkpoints(repo, run_dir.name, run_dir / CHECKPOINT_INDEX)


@dataclass(frozen=True)
class RunWorkspace:
    """Where a recorded run worked.

    Attributes:
        run_id: The run.
        repo: The work tree it worked in (its worktree for a ``--worktree`` run).
        checkpoints: Its checkpoints.
        branch: Its branch for a ``--worktree`` run, else None.
        origin: The checkout a ``--worktree`` run was made from, else None.
    """

    run_id: str
    repo: Repository
    checkpoints: Checkpoints
    branch: str | None
    origin: Path | None


def open_run_workspace(run_dir: Path, state: dict[str, Any]) -> RunWorkspace:
    """The workspace of the run whose folder is ``run_dir`` and state ``state``.

    Raises:
        RepositoryError: the run's directory is gone or is not in a git repository.
        GitUnavailableError: git is missing.
    """
    run_id = run_dir.name
    worktree = state.get("worktree") if isinstance(state.get("worktree"), dict) else None
    cwd = state.get("cwd")
    if worktree and isinstance(worktree.get("path"), str):
        cwd = worktree["path"]
    if not isinstance(cwd, str) or not cwd:
        raise RepositoryError(f"run {run_id} recorded no working directory")
    try:
        repo = open_repository(Path(cwd))
    except RepositoryError as error:
        raise RepositoryError(f"run {run_id} worked in {cwd}: {error}") from None
    branch = origin = None
    if worktree:
        branch = str(worktree.get("branch") or branch_for(run_id))
        origin = Path(str(worktree["origin"])) if worktree.get("origin") else None
    return RunWorkspace(run_id, repo, checkpoints_of(run_dir, repo), branch, origin)
