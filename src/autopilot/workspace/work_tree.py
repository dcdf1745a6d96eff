"""Where a directory's git work tree is: its top, git directory and common git
directory, from one ``git rev-parse`` (``workspace.repo.run_git``), asked once in a
process while nothing git's search depends on changes; without git at all where no
``.git`` is on the way up.
"""

from __future__ import annotations

import os
from pathlib import Path

from autopilot.errors import AutopilotError
from autopilot.workspace.repo import Repository, run_git

OBSERVE_TIMEOUT_SECONDS = 30.0
"""The longest one observing git call may take (this module's, ``workspace.git``'s)."""


def work_tree_root(cwd: Path) -> Path:
    """The top of the git work tree holding ``cwd``, or ``cwd`` outside a repository."""
    found = find_work_tree(cwd)
    return found.top if found is not None else cwd


def is_repository(cwd: Path) -> bool:
    """True if ``cwd`` is inside a git work tree."""
    return find_work_tree(cwd) is not None


_GIT_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
)

_work_trees: dict[tuple[object, ...], Repository | None] = {}
"""``find_work_tree``'s answers in this process, by what git's answer depends on."""


def _where_git_looks(cwd: Path) -> tuple[object, ...] | None:
    """What git's search for a repository from ``cwd`` depends on: the variables that
    steer it, and each ``.git`` (a folder, or a file in a linked worktree or submodule)
    in ``cwd`` and the folders above it, by inode and change time (a ``git init``, a
    removed or rewritten ``.git`` changes this). None where git could find no work tree:
    no ``.git`` anywhere up the path and no ``GIT_DIR`` (a driver iterating there starts
    no git process at all; a ``.git`` does not prove a work tree, git decides)."""
    variables = [os.environ.get(name) for name in _GIT_ENV]
    found: list[object] = [cwd, *variables]
    for folder in (cwd, *cwd.parents):
        try:
            seen = os.lstat(folder / ".git")
        except OSError:
            continue
        found.append((folder, seen.st_ino, seen.st_ctime_ns, seen.st_mtime_ns))
    if len(found) == 1 + len(variables) and not variables[0]:  # no .git, no GIT_DIR
        return None
    return tuple(found)


def find_work_tree(cwd: Path) -> Repository | None:
    """The work tree holding ``cwd``: its top, git directory and common git directory
    (absolute), from one git process, asked once in a process while no ``.git`` on the
    way up changes (``_where_git_looks``); None when ``cwd`` is not inside a work tree
    (no ``.git`` up the path, a bare repository, a git directory) or git cannot tell."""
    key = _where_git_looks(cwd)
    if key is None:
        return None
    if key in _work_trees:
        return _work_trees[key]
    try:
        done = run_git(
            cwd,
            "rev-parse",
            "--is-inside-work-tree",
            "--path-format=absolute",
            "--git-dir",
            "--git-common-dir",
            "--show-toplevel",
            timeout_seconds=OBSERVE_TIMEOUT_SECONDS,
        )
    except AutopilotError:
        return None
    lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    if done.returncode != 0 or len(lines) < 4 or lines[0].strip() != "true" or not lines[3]:
        found = None
    else:
        found = Repository(Path(lines[3]), Path(lines[1]), Path(lines[2]))
    if len(_work_trees) > 64:
        _work_trees.clear()
    _work_trees[key] = found
    return found
