"""How many git processes a mark and a checkpoint start, and that the branch tips a
mark reads from the ref files are the ones git itself would give."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from autopilot.errors import GitUnavailableError
from autopilot.workspace.checkpoints import Checkpoints
from autopilot.workspace.git import GitObserver
from autopilot.workspace.marks import GitWorkspace
from autopilot.workspace.ref_files import read_tips
from autopilot.workspace.repo import git_program, open_repository, run_git
from autopilot.workspace.tree_watch import TreeWatch
from tests.conftest import git


@pytest.fixture
def git_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``git`` first on PATH that logs each call's first argument after the
    hardening options, then runs the real one; returns the log."""
    real = shutil.which("git")
    assert real is not None
    folder = tmp_path / "counting-git"
    folder.mkdir()
    log = tmp_path / "git-calls.log"
    script = folder / "git"
    script.write_text(f"#!/bin/sh\necho \"$*\" >> '{log}'\nexec '{real}' \"$@\"\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


def _calls(log: Path) -> list[str]:
    """The git subcommand of each logged call (the word after the ``-c`` options)."""
    found = []
    for line in log.read_text().splitlines() if log.exists() else []:
        words = line.split()
        index = 0
        while index < len(words) and words[index].startswith("-"):
            index += 2 if words[index] in ("-c", "-C") else 1
        found.append(words[index] if index < len(words) else "")
    log.unlink(missing_ok=True)
    return found


def _git_tips(repo: Path) -> frozenset[str]:
    refs = git(repo, "for-each-ref", "--format=%(objectname)", "refs/heads").split()
    reflog = git(repo, "reflog", "show", "-n1000", "--format=%H", "HEAD").split()
    return frozenset(refs + reflog)


def _branchy_repo(repo: Path) -> Path:
    """Branches loose and packed, a branch updated since it was packed, a symbolic
    ref among the branches, a reset HEAD (its old commit only in the reflog), and a
    linked worktree; returns the worktree."""
    for number in range(3):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{number}")
        git(repo, "branch", f"topic/b{number}")
    git(repo, "pack-refs", "--all")
    git(repo, "checkout", "-q", "topic/b1")
    git(repo, "commit", "-q", "--allow-empty", "-m", "after packing")
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/topic/b0")
    git(repo, "checkout", "-q", "-b", "gone")
    git(repo, "commit", "-q", "--allow-empty", "-m", "to be reset away")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    linked = repo.parent / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    git(linked, "commit", "-q", "--allow-empty", "-m", "in the linked worktree")
    return linked


def test_tips_read_from_the_ref_files_are_gits(repo: Path) -> None:
    linked = _branchy_repo(repo)
    common = repo / ".git"
    assert read_tips(common, common, 1000) == _git_tips(repo)
    assert read_tips(common / "worktrees" / "linked", common, 1000) == _git_tips(linked)


def test_only_the_latest_reflog_entries_count(repo: Path) -> None:
    shas = []
    for number in range(5):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{number}")
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    common = repo / ".git"
    tips = read_tips(common, common, 2)
    assert tips is not None
    assert shas[-2] in tips and shas[-1] in tips
    assert shas[0] not in tips


def test_refs_kept_another_way_are_left_to_git(repo: Path) -> None:
    common = repo / ".git"
    (common / "reftable").mkdir()
    assert read_tips(common, common, 1000) is None


def test_a_mark_is_one_git_process(repo: Path, git_calls: Path) -> None:
    _branchy_repo(repo)
    observer = GitObserver(repo)
    git(repo, "checkout", "-q", "-b", "another")
    (repo / "new.txt").write_text("x\n")
    _calls(git_calls)
    mark = observer.mark()
    assert _calls(git_calls) == ["status"]
    assert mark.tips == _git_tips(repo)


def test_a_commit_on_another_branch_is_new_between_marks(repo: Path) -> None:
    observer = GitObserver(repo)
    before = observer.mark()
    git(repo, "branch", "elsewhere")
    git(repo, "pack-refs", "--all")
    git(repo, "commit", "-q", "--allow-empty", "-m", "on main")
    tip = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    after = observer.mark()
    assert [c.sha for c in observer.new_commits(before, after)] == [tip]


def test_an_unchanged_checkpoint_is_four_git_processes(
    tmp_path: Path, repo: Path, git_calls: Path
) -> None:
    store = Checkpoints(open_repository(repo), "run-1", tmp_path / "run" / "checkpoint.index")
    store.take_baseline()
    head = git(repo, "rev-parse", "HEAD").strip()
    _calls(git_calls)
    taken = store.take_iteration(1, head)
    assert _calls(git_calls) == ["add", "write-tree", "commit-tree", "update-ref"]
    assert taken.changes == ()
    (repo / "changed.txt").write_text("x\n")
    _calls(git_calls)
    taken = store.take_iteration(2, head)
    assert _calls(git_calls) == ["add", "write-tree", "diff-tree", "commit-tree", "update-ref"]
    assert [c.path for c in taken.changes] == ["changed.txt"]
    history = store.history()
    assert [(c.name, c.sequence, c.head) for c in history] == [
        ("baseline", 1, head),
        ("iter-0001", 2, head),
        ("iter-0002", 3, head),
    ]
    assert git(repo, "rev-parse", "refs/autopilot/run-1/iter-0002^").strip() == history[1].sha


def test_an_iteration_that_changes_nothing_is_its_two_marks(
    tmp_path: Path, repo: Path, git_calls: Path
) -> None:
    run_dir = tmp_path / "runs" / "repo-1"
    run_dir.mkdir(parents=True)
    workspace = GitWorkspace(repo, run_dir)
    workspace._watch = TreeWatch(None)  # every mark a git status (``test_tree_watch``)
    workspace.checkpoint(0)
    workspace.mark()
    (repo / "notes.txt").write_text("the first iteration's work\n")
    workspace.mark()
    first = workspace.checkpoint(1)
    assert first is not None and first.name == "iter-0001"
    for number in (2, 3):
        _calls(git_calls)
        workspace.mark()
        workspace.mark()
        shared = workspace.checkpoint(number)
        assert _calls(git_calls) == ["status", "status"]
        assert shared is not None
        assert (shared.name, shared.sha, shared.files_changed) == ("iter-0001", first.sha, 0)
    assert workspace.checkpoint(4) is not None  # no mark since the last checkpoint
    assert "add" in _calls(git_calls)
    (repo / "notes.txt").write_text("the fifth iteration's work\n")
    workspace.mark()
    fifth = workspace.checkpoint(5)
    assert fifth is not None and (fifth.name, fifth.files) == ("iter-0005", ("M notes.txt",))
    assert _calls(git_calls)[1:] == ["add", "write-tree", "diff-tree", "commit-tree", "update-ref"]


def test_a_baseline_after_a_mark_is_shared_by_an_unchanged_first_iteration(
    tmp_path: Path, repo: Path, git_calls: Path
) -> None:
    """A driver marks before its baseline (``IterationMarks.opening``): the baseline
    takes HEAD from the mark, and a first iteration that changed nothing shares it."""
    run_dir = tmp_path / "runs" / "repo-1"
    run_dir.mkdir(parents=True)
    (repo / "draft.txt").write_text("uncommitted before the run\n")
    workspace = GitWorkspace(repo, run_dir)
    workspace.mark()
    _calls(git_calls)
    baseline = workspace.checkpoint(0)
    assert baseline is not None and baseline.files == ("A draft.txt",)
    calls = ["for-each-ref", "add", "write-tree", "diff-tree", "commit-tree", "update-ref"]
    assert _calls(git_calls) == calls  # no rev-parse of HEAD
    workspace.mark()
    first = workspace.checkpoint(1)
    assert _calls(git_calls) == ["status"]
    assert first is not None
    assert (first.name, first.sha, first.files_changed) == ("baseline", baseline.sha, 0)
    (repo / "draft.txt").write_text("the second iteration's work\n")
    workspace.mark()
    second = workspace.checkpoint(2)
    assert second is not None and (second.name, second.files) == ("iter-0002", ("M draft.txt",))


def test_a_run_asks_git_where_its_work_tree_is_once(
    tmp_path: Path, repo: Path, git_calls: Path
) -> None:
    run_dir = tmp_path / "runs" / "repo-1"
    run_dir.mkdir(parents=True)
    _calls(git_calls)
    workspace = GitWorkspace(repo, run_dir)
    workspace.checkpoint(0)
    workspace.mark()
    (repo / "notes.txt").write_text("work\n")
    workspace.mark()
    workspace.checkpoint(1)
    assert _calls(git_calls) == [
        "rev-parse",  # the work tree's top and git directories, for the whole run
        "config",  # the content filters trusted
        "for-each-ref",  # a baseline already? (a relaunch keeps the first)
        "add",
        "write-tree",
        "rev-parse",  # HEAD, the baseline's parent tree
        "diff-tree",
        "commit-tree",
        "update-ref",
        "status",
        "status",
        "add",
        "write-tree",
        "diff-tree",
        "commit-tree",
        "update-ref",
    ]


def test_git_is_looked_up_once_per_path_and_again_when_it_is_gone(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_git`` execs the git ``PATH`` finds without searching ``PATH`` on each
    call; a git removed since is looked up again, and a relative folder on ``PATH``
    leaves the search to ``execvp``."""
    real = shutil.which("git")
    assert real is not None
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, word in ((first, "first"), (second, "second")):
        folder.mkdir()
        script = folder / "git"
        script.write_text(
            f"#!/bin/sh\necho {word} >> '{tmp_path / 'ran.log'}'\nexec '{real}' \"$@\"\n"
        )
        script.chmod(0o755)
    path = os.pathsep.join([str(first), str(second), os.environ["PATH"]])
    monkeypatch.setenv("PATH", path)
    assert git_program(path) == str(first / "git")
    assert run_git(repo, "rev-parse", "HEAD").returncode == 0
    (first / "git").unlink()
    assert run_git(repo, "rev-parse", "HEAD").returncode == 0  # found again: second
    assert git_program(path) == str(second / "git")
    assert (tmp_path / "ran.log").read_text().split() == ["first", "second"]
    assert git_program(os.pathsep.join(["bin", str(second)])) is None
    assert git_program(str(tmp_path / "nowhere")) is None


def test_a_git_that_cannot_be_executed_is_unavailable_not_looked_up_forever(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    script = folder / "git"
    script.write_text("#!/nonexistent/interpreter\n")  # execve: no such file
    script.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(folder), os.environ["PATH"]]))
    with pytest.raises(GitUnavailableError, match="cannot run"):
        run_git(repo, "rev-parse", "HEAD")
    observer = GitObserver(tmp_path)  # not a repository as far as this git can tell
    assert observer.mark().entries is None


def test_a_mark_counts_no_commits_against_the_upstream(
    repo: Path, tmp_path: Path, git_calls: Path
) -> None:
    git(repo, "commit", "-q", "--allow-empty", "-m", "first")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "commit", "-q", "--allow-empty", "-m", "ahead of origin")
    observer = GitObserver(clone)
    git_calls.unlink(missing_ok=True)
    mark = observer.mark()
    calls = git_calls.read_text()
    assert "status" in calls and "--no-ahead-behind" in calls
    assert mark.head == git(clone, "rev-parse", "HEAD").strip()
