"""What moving a work tree from one git tree to another changes, and what of the
user's it would overwrite.

``git read-tree -m -u`` refuses to overwrite an untracked file but counts an ignored
one as expendable (git 2.39: a ``.log`` file the user keeps is replaced without a
word). autopilot does not: ``restore`` and ``merge`` both ask ``in_the_way`` first and
refuse, naming the files, before anything is written.
"""

from __future__ import annotations

import os
from pathlib import Path

from autopilot.workspace.checkpoint_facts import FileChange
from autopilot.workspace.repo import Repository, split_z


def tree_changes(repo: Repository, old: str, new: str) -> tuple[FileChange, ...]:
    """Paths that differ between two trees (or commits), sorted; renames as delete + add.

    Raises:
        GitCommandError, GitUnavailableError: git failed.
    """
    data = repo.out("diff-tree", "-r", "-z", "--no-renames", "--name-status", old, new)
    items = split_z(data)
    return tuple(
        sorted(
            (FileChange(items[i][:1], items[i + 1]) for i in range(0, len(items) - 1, 2)),
            key=lambda change: change.path,
        )
    )


def in_the_way(top: Path, changes: tuple[FileChange, ...]) -> list[str]:
    """Paths ``changes`` would add over something on disk that the old tree does not
    have (an ignored file or folder, or an untracked one): a file or symlink at the path
    or at one of its parent folders, or files inside a folder at the path. What the
    change itself deletes (a file that becomes a folder) is not in the way.

    Args:
        top: The top of the work tree.
        changes: From the tree the work tree holds to the one it moves to.

    Returns:
        The added paths that are blocked, in the order of ``changes``.
    """
    leaving = {change.path for change in changes if change.status == "D"}
    found = []
    for change in changes:
        if change.status != "A":
            continue
        path = top / change.path
        blockers = [
            parent
            for parent in path.parents
            if top in parent.parents
            and os.path.lexists(parent)
            and (parent.is_symlink() or not parent.is_dir())
            and parent.relative_to(top).as_posix() not in leaving
        ]
        if os.path.lexists(path) and (path.is_symlink() or not path.is_dir()):
            blockers.append(path)  # not in the old tree, so untracked or ignored
        elif path.is_dir() and not path.is_symlink():
            blockers += [
                inside
                for inside in path.rglob("*")
                if not inside.is_dir() and inside.relative_to(top).as_posix() not in leaving
            ]
        if blockers:
            found.append(change.path)
    return found
