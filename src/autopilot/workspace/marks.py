"""The workspace as the loop sees it: marks of the work tree, the commits between two
marks, how HEAD moved, and the run's checkpoints. ``GitWorkspace`` is the real one
(``workspace.git``, ``workspace.taking``); tests inject a fake."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from autopilot.core.vocabulary import Progress
from autopilot.errors import AutopilotError
from autopilot.store.rundir import RunDir
from autopilot.workspace import git
from autopilot.workspace.git import Commit, TreeMark
from autopilot.workspace.history import HeadMove, head_move
from autopilot.workspace.repo import Repository, open_repository
from autopilot.workspace.taking import CheckpointFacts, RunCheckpointer
from autopilot.workspace.tree_watch import TreeWatch
from autopilot.workspace.worktrees import restore_run_branch

__all__ = [
    "CheckpointFacts",
    "Commit",
    "GitWorkspace",
    "HeadMove",
    "TreeMark",
    "Workspace",
    "progress_between",
]


class Workspace(Protocol):
    """Observations of the work tree for one iteration.

    Attributes:
        repository: Whether the work tree is a git repository (decided once).
    """

    repository: bool

    def mark(self) -> TreeMark:
        """HEAD, every changed or untracked path and the branch tips now
        (``entries`` None: no repo, or git could not answer)."""
        ...

    def new_commits(self, before: TreeMark, after: TreeMark) -> list[Commit]:
        """Commits made between two marks, on any branch, oldest first."""
        ...

    def take_warnings(self) -> list[str]:
        """What went wrong since the last call (a git call that timed out)."""
        ...

    def changed_files(self, before: TreeMark, after: TreeMark) -> int | None:
        """Paths that differ between two marks (None outside a repository)."""
        ...

    def changed_paths(self, before: TreeMark, after: TreeMark) -> list[str] | None:
        """Which paths differ between two marks (None outside a repository)."""
        ...

    def head_move(self, before: TreeMark, after: TreeMark) -> HeadMove | None:
        """How HEAD moved between two marks beyond new commits on the same branch (a
        reset, rebase, amend, branch switch or detach), or None."""
        ...

    def checkpoint(self, iteration: int) -> CheckpointFacts | None:
        """Checkpoint the work tree: the baseline for 0 (None if the run has one
        already), else after ``iteration``. None when checkpoints are off, outside a
        repository, or git failed (then ``problem`` says so)."""
        ...

    def problem(self) -> str | None:
        """A problem with checkpoints not yet reported (each distinct one once)."""
        ...

    def gone(self) -> str | None:
        """Why the work tree cannot be worked in any more (deleted), or None."""
        ...

    def keep_branch(self) -> str | None:
        """Make the run's branch again if the agent deleted it (a ``--worktree``
        run's ``autopilot/<runId>``), at the work tree's HEAD commit; what was done,
        for a warning, or None."""
        ...


class GitWorkspace:
    """The real work tree, through hardened ``git`` calls (``workspace.git``).

    Args:
        cwd: The work tree.
        run_dir: The run's folder (its checkpoint index lives there); None: no
            checkpoints.
        branch: The run's own branch (a ``--worktree`` run's), kept by
            ``keep_branch``; None: none.
    """

    def __init__(self, cwd: Path, run_dir: Path | None = None, branch: str | None = None) -> None:
        self.cwd = cwd
        self.branch = branch
        # Decides once whether it is a repository, and which content filters to trust.
        records = RunDir(run_dir).git_filters if run_dir is not None else None
        self._git = git.GitObserver(cwd, filters_record=records)
        self.repository = self._git.repository
        self._run_dir = run_dir
        self._checkpointer: RunCheckpointer | None = None
        self._repo: Repository | None = None
        self._last: TreeMark | None = None
        # Marks in quick succession: the last one while nothing touched the tree since.
        self._watch = TreeWatch(self._git.work_tree)

    def mark(self) -> TreeMark:
        """See ``Workspace.mark``: one ``git status``, or none when the tree is
        watched and nothing touched it since the last one (``workspace.tree_watch``)."""
        mark = self._watch.mark(self._git.mark)
        self._last = mark
        return mark

    def new_commits(self, before: TreeMark, after: TreeMark) -> list[Commit]:
        """See ``Workspace.new_commits``."""
        return self._git.new_commits(before, after)

    def changed_files(self, before: TreeMark, after: TreeMark) -> int | None:
        """See ``Workspace.changed_files``."""
        return self._git.changed_files(before, after)

    def take_warnings(self) -> list[str]:
        """See ``Workspace.take_warnings``."""
        return self._git.take_warnings()

    def changed_paths(self, before: TreeMark, after: TreeMark) -> list[str] | None:
        """See ``Workspace.changed_paths``."""
        return self._git.changed_paths(before, after)

    def head_move(self, before: TreeMark, after: TreeMark) -> HeadMove | None:
        """See ``Workspace.head_move``."""
        if after.entries is None or (before.head, before.branch) == (after.head, after.branch):
            return None
        repo = self._repository()
        if repo is None:
            return None
        try:
            return head_move(repo, (before.head, before.branch), (after.head, after.branch))
        except AutopilotError:  # git timed out or vanished: the move goes unrecorded
            return None

    def checkpoint(self, iteration: int) -> CheckpointFacts | None:
        """See ``Workspace.checkpoint``. Outside a repository nothing is said here:
        the driver says once that the work tree is not a repository."""
        if self._run_dir is None or self.gone() is not None:
            return None
        if self._checkpointer is None:
            if not self.repository:
                self._run_dir = None
                return None
            self._checkpointer = RunCheckpointer(
                self.cwd, self._run_dir, filters=self._git.filters, work_tree=self._git.work_tree
            )
        # The work tree as the mark just before saw it (the driver marks, then
        # checkpoints): its HEAD, and its tree key, which lets an unchanged tree share
        # the previous checkpoint without a git process. A mark serves one checkpoint.
        last, self._last = self._last or git.UNKNOWN, None
        if iteration == 0:
            return self._checkpointer.baseline(last.head, last.tree_key)
        return self._checkpointer.after_iteration(iteration, last.head, last.tree_key)

    def problem(self) -> str | None:
        """See ``Workspace.problem``."""
        return self._checkpointer.warning() if self._checkpointer else None

    def gone(self) -> str | None:
        """See ``Workspace.gone``."""
        if self.cwd.is_dir():
            return None
        return f"the work tree {self.cwd} no longer exists (deleted while the run ran)"

    def keep_branch(self) -> str | None:
        """See ``Workspace.keep_branch`` (``worktrees.restore_run_branch``)."""
        if self.branch is None or self.gone() is not None:
            return None
        repo = self._repository()
        if repo is None:
            return None
        try:
            return restore_run_branch(repo, self.branch)
        except AutopilotError as error:  # git timed out or vanished
            return f"the run's branch {self.branch} could not be checked: {error}"

    def _repository(self) -> Repository | None:
        if self._repo is None:
            try:
                self._repo = self._git.work_tree or open_repository(self.cwd)
            except AutopilotError:
                return None
        return self._repo


def progress_between(before: TreeMark, after: TreeMark) -> Progress:
    """A new commit (on any branch) or a changed work tree: progress; outside a
    repository: unknown. HEAD moving to a commit a branch or HEAD already held (a
    checkout of another branch) is not progress by itself."""
    if after.fingerprint is None:
        return Progress.UNKNOWN
    moved = after.head != before.head and after.head not in before.tips
    if moved or after.fingerprint != before.fingerprint:
        return Progress.MADE
    return Progress.NONE
