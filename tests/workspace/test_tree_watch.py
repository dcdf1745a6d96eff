"""A mark reuses the one before only while inotify reported nothing in the work tree
and its git directories since that mark's ``git status`` (``workspace.tree_watch``):
every kind of change a ``git status`` would see makes the next mark a fresh one."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from autopilot.workspace.git import GitObserver, TreeMark
from autopilot.workspace.inotify_calls import Event
from autopilot.workspace.tree_watch import VOUCH_WINDOW_SECONDS, TreeWatch
from tests.conftest import git, init_repo

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")


class Marks:
    """Marks of ``repo`` as a driver takes them (``GitWorkspace.mark``), on a clock the
    test moves, counting the ``git status`` calls."""

    def __init__(self, repo: Path, *, max_folders: int = 2000) -> None:
        self.now = 100.0
        self.statuses = 0
        self.observer = GitObserver(repo)
        self.watch = TreeWatch(
            self.observer.work_tree, max_folders=max_folders, monotonic=lambda: self.now
        )

    def mark(self) -> TreeMark:
        return self.watch.mark(self._status)

    def _status(self) -> TreeMark:
        self.statuses += 1
        return self.observer.mark()

    def watched(self) -> Marks:
        """Two quick marks: the tree is watched from the second on."""
        self.mark()
        self.mark()
        assert self.watch.watching
        self.statuses = 0
        return self


def test_quick_marks_of_an_untouched_tree_are_one_git_status(repo: Path) -> None:
    marks = Marks(repo)
    first = marks.mark()
    assert not marks.watch.watching  # one mark is not a quick succession
    second = marks.mark()
    assert marks.watch.watching and marks.statuses == 2
    for _ in range(5):
        marks.now += 0.1
        assert marks.mark() is second
    assert marks.statuses == 2
    assert first == second


def test_reading_files_and_history_touches_nothing(repo: Path) -> None:
    marks = Marks(repo).watched()
    (repo / "README.md").read_text()
    git(repo, "log", "--oneline")
    git(repo, "show", "HEAD:README.md")
    marks.mark()
    assert marks.statuses == 0


def _write(repo: Path) -> None:
    (repo / "README.md").write_text("changed\n")


def _append_same_size(repo: Path) -> None:
    path = repo / "README.md"
    text = path.read_text()
    path.write_text(text.upper())  # same size, written within the same clock tick


def _create_in_new_folders(repo: Path) -> None:
    (repo / "a" / "b").mkdir(parents=True)
    (repo / "a" / "b" / "new.py").write_text("x = 1\n")


def _remove(repo: Path) -> None:
    (repo / "README.md").unlink()


def _chmod(repo: Path) -> None:
    (repo / "README.md").chmod(0o755)


def _rename(repo: Path) -> None:
    (repo / "README.md").rename(repo / "README.txt")


def _ignored(repo: Path) -> None:
    (repo / "debug.log").write_text("ignored, but touched\n")


def _commit(repo: Path) -> None:
    git(repo, "commit", "-q", "--allow-empty", "-m", "an empty commit changes no file")


def _stage(repo: Path) -> None:
    (repo / "README.md").write_text("staged\n")
    git(repo, "add", "README.md")


def _branch(repo: Path) -> None:
    git(repo, "branch", "topic")


def _exclude(repo: Path) -> None:
    with (repo / ".git" / "info" / "exclude").open("a") as stream:
        stream.write("README.md\n")


CHANGES: list[Callable[[Path], None]] = [
    _write,
    _append_same_size,
    _create_in_new_folders,
    _remove,
    _chmod,
    _rename,
    _ignored,
    _commit,
    _stage,
    _branch,
    _exclude,
]


@pytest.mark.parametrize("change", CHANGES, ids=lambda change: change.__name__.strip("_"))
def test_any_change_makes_the_next_mark_a_git_status(
    repo: Path, change: Callable[[Path], None]
) -> None:
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore logs")
    marks = Marks(repo).watched()
    marks.mark()
    change(repo)
    after = marks.mark()
    assert marks.statuses == 1
    assert after == marks.observer.mark()  # the fresh mark is git's answer now
    marks.mark()
    assert marks.statuses == 1  # and it stands while nothing else changes


def test_a_folder_made_after_watching_began_is_watched(repo: Path) -> None:
    marks = Marks(repo).watched()
    (repo / "new").mkdir()
    marks.mark()
    assert marks.statuses == 1
    (repo / "new" / "deeper").mkdir()
    marks.mark()
    (repo / "new" / "deeper" / "file.txt").write_text("inside a folder made meanwhile\n")
    last = marks.mark()
    assert marks.statuses == 3
    assert "new/deeper/file.txt" in (last.entries or {})


def test_a_renamed_folder_is_watched_afresh(repo: Path) -> None:
    (repo / "old").mkdir()
    (repo / "old" / "inner").mkdir()
    marks = Marks(repo).watched()
    (repo / "old").rename(repo / "new")
    marks.mark()
    marks.mark()
    assert marks.statuses == 1 and marks.watch.watching
    (repo / "new" / "inner" / "file.txt").write_text("under the folder's new name\n")
    last = marks.mark()
    assert marks.statuses == 2
    assert "new/inner/file.txt" in (last.entries or {})


def test_a_mark_older_than_the_window_is_not_reused(repo: Path) -> None:
    marks = Marks(repo).watched()
    marks.now += VOUCH_WINDOW_SECONDS + 0.1
    marks.mark()
    assert marks.statuses == 1
    marks.now += 1
    marks.mark()
    assert marks.statuses == 1


def test_marks_far_apart_never_watch(repo: Path) -> None:
    marks = Marks(repo)
    for _ in range(3):
        marks.mark()
        marks.now += VOUCH_WINDOW_SECONDS + 1
    assert not marks.watch.watching and marks.statuses == 3


def test_a_tree_with_too_many_folders_is_not_watched(repo: Path) -> None:
    for number in range(5):
        (repo / f"folder-{number}").mkdir()
    marks = Marks(repo, max_folders=4)
    for _ in range(3):
        marks.mark()
    assert not marks.watch.watching and marks.statuses == 3


def test_a_nested_repository_stops_the_watch(tmp_path: Path, repo: Path) -> None:
    marks = Marks(repo).watched()
    init_repo(repo / "vendored")
    for _ in range(3):
        marks.mark()
    assert not marks.watch.watching and marks.statuses == 3
    already = Marks(repo)
    already.mark()
    already.mark()
    assert not already.watch.watching


def test_a_lost_event_queue_watches_afresh(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marks = Marks(repo).watched()
    folders = marks.watch._folders
    assert folders is not None
    overflow = [[Event(-1, 0x4000, 0, "")]]  # IN_Q_OVERFLOW
    monkeypatch.setattr(folders._inotify, "read", lambda: overflow.pop() if overflow else [])
    marks.mark()
    assert marks.statuses == 1
    assert marks.watch.watching and marks.watch._folders is not folders
    marks.mark()
    assert marks.statuses == 1


def test_outside_a_repository_nothing_is_watched(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    marks = Marks(plain)
    for _ in range(3):
        assert marks.mark().entries is None
    assert not marks.watch.watching


def test_a_linked_worktrees_own_git_directory_is_watched(repo: Path) -> None:
    linked = repo.parent / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    marks = Marks(linked).watched()
    git(linked, "commit", "-q", "--allow-empty", "-m", "on the linked worktree's branch")
    marks.mark()
    assert marks.statuses == 1
    os.utime(repo / "README.md")  # the main work tree is not this one's
    marks.mark()
    assert marks.statuses == 1


def test_a_tree_removed_and_made_again_at_its_path_is_watched_afresh(repo: Path) -> None:
    """A clone put in its place: the old tree's watches ended with it, and nothing
    watched its parent; the new tree is watched from the next ``git status`` on."""
    marks = Marks(repo).watched()
    clone = repo.parent / "clone"
    git(repo.parent, "clone", "-q", str(repo), str(clone))
    shutil.rmtree(repo)
    clone.rename(repo)
    marks.mark()
    assert marks.statuses == 1
    for number in range(3):
        (repo / f"new-{number}.txt").write_text("written into the tree made again\n")
        last = marks.mark()
        assert f"new-{number}.txt" in (last.entries or {})
    assert marks.statuses == 4
    assert marks.watch.watching
