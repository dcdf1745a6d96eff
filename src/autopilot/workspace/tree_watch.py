"""Whether anything at all touched a git work tree since its last ``git status``,
told by Linux inotify (``workspace.inotify_calls``) instead of another git process.

A mark (``workspace.git.GitObserver.mark``) is one ``git status``: about 2 ms, nothing
beside an agent that works for minutes, but most of a driver's own cost in an
iteration that lasts milliseconds (an agent that fails at once, a quick script). When
marks come quickly, the one before taken less than ``VOUCH_WINDOW_SECONDS`` ago, the
driver watches every folder of the work tree and of its git directories before its
next ``git status``; from then on a mark reuses the mark before when the kernel
reported nothing at all in any of them since that mark's ``git status`` began, and
that began at most ``VOUCH_WINDOW_SECONDS`` ago. It answers less than git's own
fsmonitor (not which paths changed, only whether anything did), so any report at all
means a real ``git status``.

What counts: a file or folder written, truncated, created, removed or renamed, or its
mode, owner or times changed, in any folder of the work tree (ignored ones too: a build
writing into an ignored folder costs a ``git status``, never a missed change) or of its
git directories (HEAD, the index, refs, reflogs, config, ``info/exclude``; not the
object store, which git writes only beside one of those). What it cannot see, and why
a reused mark is never older than the window: a write through a memory map, a change
made on another machine to a network file system, a file changed through a hard link
outside the tree, a file system mounted inside the tree, and the files git reads from
outside it (its global and system configuration, an excludes or attributes file or an
included configuration the repository's configuration names there). An agent
that works longer than the window gets a ``git status`` at every mark, as without
this module.

Nothing is watched (every mark a ``git status``), for the rest of the run, when the
tree cannot be watched whole: not Linux, the system's inotify limits reached, more
than ``MAX_FOLDERS`` folders, a nested repository or submodule (a ``.git`` below the
top, whose own git directory is not watched), a folder that cannot be read. A queue
overflow, a folder renamed (its watches' paths are stale), or the tree or a git
directory removed (one made again at its path would be watched by nobody) drops the
watches; the next quick mark watches afresh before its ``git status``.
"""

from __future__ import annotations

import errno
import os
import sys
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autopilot.workspace.git import TreeMark
    from autopilot.workspace.inotify_calls import Inotify
    from autopilot.workspace.repo import Repository

VOUCH_WINDOW_SECONDS = 5.0
"""How old (seconds, monotonic) a ``git status`` may be and its mark still stand for a
tree nothing touched since; and how soon after one the next mark must come for the
driver to start watching."""

MAX_FOLDERS = 2000
"""The most folders watched (work tree and git directories); a larger tree is not."""

_CHANGES = 0x2 | 0x4 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
"""inotify(7): ``IN_MODIFY``, ``IN_ATTRIB``, ``IN_MOVED_FROM``, ``IN_MOVED_TO``,
``IN_CREATE``, ``IN_DELETE``, ``IN_DELETE_SELF``, ``IN_MOVE_SELF``. Not a read, an
open or a close: git's own ``status`` and the driver's digests of changed files read."""
_FOLDER_ONLY = 0x01000000 | 0x02000000  # IN_ONLYDIR | IN_DONT_FOLLOW
_CREATE = 0x100
_MOVED = 0x40 | 0x80  # IN_MOVED_FROM | IN_MOVED_TO
_STALE = 0x800 | 0x4000 | 0x2000  # IN_MOVE_SELF (a watched folder), IN_Q_OVERFLOW, IN_UNMOUNT
_IS_FOLDER = 0x40000000  # IN_ISDIR
_GONE = 0x400 | 0x8000  # IN_DELETE_SELF, IN_IGNORED (the watch ended)

_GIT_SKIPPED = frozenset({"objects", "lfs", "modules", "worktrees"})
"""Folders of the common git directory not watched: the object store and large files
(written only beside a ref or the index), submodules' git directories (a tree with a
submodule is not watched), other linked worktrees' own (this one's is watched apart)."""


class _Unwatchable(Exception):
    """The tree cannot be watched whole (see the module)."""


class _Folders:
    """inotify on every folder of a work tree and of its git directories.

    Raises:
        _Unwatchable: see the module.
    """

    def __init__(self, repository: Repository, max_folders: int) -> None:
        if not sys.platform.startswith("linux"):
            raise _Unwatchable
        try:
            from autopilot.workspace.inotify_calls import Inotify

            self._inotify: Inotify = Inotify()
        except (OSError, AttributeError):  # AttributeError: no inotify in libc
            raise _Unwatchable from None
        # Closed with this object, whoever drops it (a workspace is not closed).
        self.close = weakref.finalize(self, self._inotify.close)
        self._max_folders = max_folders
        self._paths: dict[int, tuple[str, bool]] = {}  # wd → (folder, in the work tree)
        self._git_roots: set[int] = set()
        self.stale = False
        try:
            self._top = self._walk(str(repository.top), tree=True, top=True)
            git_dirs = {str(repository.common_dir), str(repository.git_dir)}
            for folder in sorted(git_dirs):
                self._git_roots.add(self._walk(folder, tree=False, top=True))
        except BaseException:
            self.close()
            raise

    def touched(self) -> bool:
        """Did the kernel report anything since the last call? New folders are watched
        from now on (before the ``git status`` a report calls for).

        Raises:
            _Unwatchable: a nested repository appeared, or too many folders.
        """
        reported = False
        new: list[tuple[int, str]] = []
        while events := self._inotify.read():
            reported = True
            for event in events:
                if event.mask & _STALE or (event.mask & _MOVED and event.mask & _IS_FOLDER):
                    self.stale = True  # a folder renamed: its watches' paths are stale
                elif event.mask & _GONE and (event.wd == self._top or event.wd in self._git_roots):
                    self.stale = True  # the tree or a git directory removed: one made again
                    # at its path would be watched by nobody (its parent is not watched)
                elif event.name == ".git" and event.wd != self._top and self._in_tree(event.wd):
                    raise _Unwatchable  # a repository or submodule made inside the tree
                elif event.mask & _CREATE and event.mask & _IS_FOLDER:
                    new.append((event.wd, event.name))
        if not self.stale:
            for wd, name in new:
                if wd in self._git_roots and name in _GIT_SKIPPED:
                    continue
                where = self._paths.get(wd)
                if where is not None:
                    self._walk(os.path.join(where[0], name), tree=where[1], top=False)
        return reported

    def _in_tree(self, wd: int) -> bool:
        where = self._paths.get(wd)
        return where is not None and where[1]

    def _walk(self, root: str, *, tree: bool, top: bool) -> int:
        """Watch ``root`` and every folder below it (symlinks not followed); the
        watch of ``root`` (-1: it is gone already, as a removal the parent's watch
        reported)."""
        first = -1
        pending = [(root, top)]
        while pending:
            folder, is_top = pending.pop()
            try:
                wd = self._inotify.add_watch(folder, _CHANGES | _FOLDER_ONLY)
            except OSError as error:
                if error.errno in (errno.ENOENT, errno.ENOTDIR):
                    continue  # removed meanwhile: its parent's watch reported it
                raise _Unwatchable from None
            self._paths[wd] = (folder, tree)
            first = wd if first == -1 else first
            if len(self._paths) > self._max_folders:
                raise _Unwatchable
            try:
                entries = os.scandir(folder)
            except FileNotFoundError:
                continue
            except OSError:
                raise _Unwatchable from None
            with entries:
                for entry in entries:
                    if tree and entry.name == ".git":
                        if is_top:
                            continue  # the work tree's own, watched as a git directory
                        raise _Unwatchable  # a nested repository or a submodule
                    if not tree and is_top and entry.name in _GIT_SKIPPED:
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append((entry.path, False))
                    except OSError:
                        continue  # gone meanwhile
        return first


class TreeWatch:
    """Vouches for a work tree nothing touched since its last ``git status`` (see the
    module); used by ``workspace.marks.GitWorkspace.mark`` around each ``git status``.

    Args:
        repository: The work tree (None: not a repository, nothing is watched).
        window_seconds: ``VOUCH_WINDOW_SECONDS``.
        max_folders: ``MAX_FOLDERS``.
        monotonic: The clock (seconds).
    """

    def __init__(
        self,
        repository: Repository | None,
        *,
        window_seconds: float = VOUCH_WINDOW_SECONDS,
        max_folders: int = MAX_FOLDERS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._repository = repository
        self._window_seconds = window_seconds
        self._max_folders = max_folders
        self._monotonic = monotonic
        self._folders: _Folders | None = None
        self._given_up = repository is None
        self._mark: TreeMark | None = None
        self._status_at: float | None = None
        self._starting_at = 0.0

    @property
    def watching(self) -> bool:
        """Whether the tree is watched now."""
        return self._folders is not None

    def mark(self, take: Callable[[], TreeMark]) -> TreeMark:
        """The last mark ``take`` (one ``git status``) gave, when nothing touched the
        tree since (see the module); else a fresh one from ``take``."""
        mark = self._unchanged()
        if mark is None:
            self._starting()
            mark = take()
            self._taken(mark)
        return mark

    def _unchanged(self) -> TreeMark | None:
        """The last ``git status``'s mark when it still stands: watched since before
        that status began, at most the window ago, and nothing reported since; else
        None."""
        folders, mark = self._folders, self._mark
        if folders is None or mark is None or self._status_at is None:
            return None
        if self._monotonic() - self._status_at > self._window_seconds:
            return None
        try:
            touched = folders.touched()
        except _Unwatchable:
            self._give_up()
            return None
        return None if touched or folders.stale else mark

    def _starting(self) -> None:
        """A ``git status`` is about to begin: what was reported until now is taken
        in (its new folders watched), and watching starts when the last status began
        less than the window ago."""
        now = self._starting_at = self._monotonic()
        self._mark = None
        folders = self._folders
        if folders is not None:
            try:
                folders.touched()
            except _Unwatchable:
                self._give_up()
                return
            if folders.stale:
                folders.close()
                self._folders = None
        quick = self._status_at is not None and now - self._status_at <= self._window_seconds
        if self._folders is None and quick and not self._given_up:
            assert self._repository is not None
            try:
                self._folders = _Folders(self._repository, self._max_folders)
            except _Unwatchable:
                self._given_up = True

    def _taken(self, mark: TreeMark) -> None:
        """The ``git status`` begun at the last ``_starting`` gave ``mark`` (one with no
        entries, git's failure, is never reused)."""
        self._status_at = self._starting_at
        watched = self._folders is not None and mark.entries is not None
        self._mark = mark if watched else None

    def _give_up(self) -> None:
        self._given_up = True
        self._mark = None
        if self._folders is not None:
            self._folders.close()
            self._folders = None
