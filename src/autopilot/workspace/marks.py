"""The workspace as the loop sees it: marks of the work tree and the commits between
two marks. ``GitWorkspace`` is the real one (``workspace.git``); tests inject a fake."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from autopilot.core.vocabulary import Progress
from autopilot.workspace import git
from autopilot.workspace.git import Commit, TreeMark

__all__ = ["Commit", "GitWorkspace", "TreeMark", "Workspace", "progress_between"]


class Workspace(Protocol):
    """Observations of the work tree for one iteration."""

    def mark(self) -> TreeMark:
        """HEAD and every changed or untracked path now (``entries`` None: no repo)."""
        ...

    def commits_between(self, before: str | None, after: str | None) -> list[Commit]:
        """Commits reachable from ``after`` but not ``before``, oldest first."""
        ...

    def changed_files(self, before: TreeMark, after: TreeMark) -> int | None:
        """Paths that differ between two marks (None outside a repository)."""
        ...


class GitWorkspace:
    """The real work tree, through plain ``git`` calls (``workspace.git``).

    Args:
        cwd: The work tree.
    """

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def mark(self) -> TreeMark:
        """See ``Workspace.mark``."""
        return git.mark(self.cwd)

    def commits_between(self, before: str | None, after: str | None) -> list[Commit]:
        """See ``Workspace.commits_between``."""
        return git.commits_between(self.cwd, before, after)

    def changed_files(self, before: TreeMark, after: TreeMark) -> int | None:
        """See ``Workspace.changed_files``."""
        return git.changed_files(self.cwd, before, after)


def progress_between(before: TreeMark, after: TreeMark) -> Progress:
    """HEAD moved or the work tree changed: progress; outside a repository: unknown."""
    if after.fingerprint is None:
        return Progress.UNKNOWN
    if after.head != before.head or after.fingerprint != before.fingerprint:
        return Progress.MADE
    return Progress.NONE
