"""A merge's temporary worktrees (``--verify`` on a merge's result, ``--rebase``),
kept where a later command finds them if the merge was killed.

Each is ``<scratch root>/<kind>-<random>/worktree`` (the scratch root is
``<runs-root>/.scratch``), a detached git worktree. The merge using it holds the lock
file ``<kind>-<random>.lock`` beside it (fcntl, so it is free once the merge is dead)
from before the folder exists until after it is gone. A merge killed outright leaves
the folder behind with its lock free: ``leftovers`` finds such folders, ``sweep``
(run by the next ``merge`` and by ``prune``) removes them from git and from disk, and
``doctor`` reports them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from autopilot.errors import AutopilotError
from autopilot.store.flock import FileLock
from autopilot.workspace.repo import Repository, first_line, open_repository, run_git

SCRATCH_DIR = ".scratch"
"""``<runs-root>/.scratch/``: merges' temporary worktrees."""

_LOCK_SUFFIX = ".lock"


def scratch_root(runs_root: Path) -> Path:
    """``<runs-root>/.scratch``."""
    return runs_root / SCRATCH_DIR


@contextlib.contextmanager
def scratch_worktree(
    repo: Repository, commit: str, *, kind: str, root: Path | None = None
) -> Iterator[Path]:
    """A detached worktree of ``repo`` at ``commit``, removed on leaving.

    Args:
        repo: The repository.
        commit: What the worktree holds.
        kind: The first part of its folder's name (``verify``, ``rebase``).
        root: The scratch root (created if missing); None: a private temporary
            folder, removed too (nothing is left for a sweep to find).

    Raises:
        GitCommandError, GitUnavailableError: git could not make the worktree.
        OSError: the scratch root cannot be written.
    """
    if root is None:
        with (
            tempfile.TemporaryDirectory(prefix="autopilot-") as private,
            scratch_worktree(repo, commit, kind=kind, root=Path(private)) as place,
        ):
            yield place
        return
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f"{kind}-", suffix=_LOCK_SUFFIX, dir=root)
    os.close(fd)
    lock = FileLock(name)
    lock.acquire()
    folder = Path(name[: -len(_LOCK_SUFFIX)])
    try:
        folder.mkdir(mode=0o700)
        place = folder / "worktree"
        repo.out("worktree", "add", "--quiet", "--detach", str(place), commit)
        yield place
    finally:
        repo.run("worktree", "remove", "--force", str(folder / "worktree"))
        _remove(folder)
        lock.release()


def _remove(folder: Path) -> None:
    with contextlib.suppress(OSError):
        shutil.rmtree(folder)
    with contextlib.suppress(OSError):
        os.unlink(folder.with_name(folder.name + _LOCK_SUFFIX))


def leftovers(root: Path) -> list[Path]:
    """The worktree folders under the scratch root ``root`` that no live merge holds.

    Each lock is taken for an instant to find out (a merge starting then makes a folder
    of its own, never one of these).
    """
    found = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if not folder.is_dir() or folder.is_symlink():
            continue
        lock = FileLock(folder.with_name(folder.name + _LOCK_SUFFIX))
        try:
            free = lock.acquire()
        except OSError:
            continue
        lock.release()
        if free:
            found.append(folder)
    return found


def sweep(root: Path) -> list[str]:
    """Remove every leftover under the scratch root ``root``: its worktree from its
    repository (``git worktree remove --force``) and its folder. Never raises.

    Returns:
        One line per folder removed, or kept and why.
    """
    lines = []
    for folder in leftovers(root):
        lock = FileLock(folder.with_name(folder.name + _LOCK_SUFFIX))
        try:
            if not lock.acquire():
                continue  # taken since: not a leftover
        except OSError:
            continue
        try:
            lines.append(_sweep_one(folder))
        finally:
            lock.release()
    return lines


def _sweep_one(folder: Path) -> str:
    place = folder / "worktree"
    why = ""
    try:
        owner = open_repository(place) if place.is_dir() else None
    except AutopilotError:
        owner = None
    if owner is not None and owner.top == place.resolve():
        common = owner.common_dir
        done = run_git(
            common, f"--git-dir={common}", "worktree", "remove", "--force", str(owner.top)
        )
        if done.returncode != 0:
            why = first_line(done.stderr) or "git worktree remove failed"
    if why:
        return f"left-over merge worktree {place} was kept: {why}"
    _remove(folder)
    return f"removed the left-over merge worktree {place}"
