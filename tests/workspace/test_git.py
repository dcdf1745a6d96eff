"""The driver's own git calls, against real git: nothing a repository plants runs in
them, a stalled call is a warning, and commits count wherever the agent made them."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import psutil
import pytest

from autopilot.core.vocabulary import Progress
from autopilot.workspace.git import GitObserver
from autopilot.workspace.marks import progress_between
from autopilot.workspace.repo import run_git
from tests.conftest import git, run_cli


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _commit(repo: Path, message: str) -> str:
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def test_a_planted_fsmonitor_never_runs(tmp_path: Path, repo: Path) -> None:
    ran = tmp_path / "fsmonitor-ran"
    hook = _script(tmp_path / "fsmonitor", f"touch {ran}; sleep 60")
    git(repo, "config", "core.fsmonitor", str(hook))
    observer = GitObserver(repo)
    started = time.monotonic()
    mark = observer.mark()
    assert mark.head == git(repo, "rev-parse", "HEAD").strip()
    assert not ran.exists()
    assert observer.take_warnings() == []
    assert time.monotonic() - started < 30  # not the hook's 60 s


def test_marks_never_rewrite_the_users_index_nor_run_its_hooks(tmp_path: Path, repo: Path) -> None:
    ran = tmp_path / "hook-ran"
    _script(repo / ".git" / "hooks" / "post-index-change", f"touch {ran}")
    index = repo / ".git" / "index"
    before = index.read_bytes()
    # A tracked file whose stat data no longer matches the index: a plain
    # `git status` would refresh the index and write it back.
    os.utime(repo / "README.md", (time.time() + 5, time.time() + 5))
    GitObserver(repo).mark()
    assert index.read_bytes() == before
    assert not ran.exists()


def test_a_git_call_that_stalls_is_a_warning_and_an_unknown_mark(
    tmp_path: Path, repo: Path
) -> None:
    # fsmonitor and hooks are off, but a clean filter still runs: the timeout bounds it,
    # and ends the filter with git.
    filter_pid = tmp_path / "filter-pid"
    (repo / ".gitattributes").write_text("*.md filter=slow\n")
    git(repo, "config", "filter.slow.clean", f"echo $$ > {filter_pid}; exec sleep 1005")
    os.utime(repo / "README.md", (time.time() + 5, time.time() + 5))
    observer = GitObserver(repo, timeout_seconds=1.0)
    mark = observer.mark()
    assert (mark.head, mark.entries) == (None, None)
    (warning,) = observer.take_warnings()
    assert "took longer than 1 s" in warning
    assert "progress and commits are unknown" in warning
    assert not _lingers(int(filter_pid.read_text()), ["sleep", "1005"])


def _lingers(pid: int, cmdline: list[str]) -> bool:
    """Is ``pid`` still ``cmdline``, alive? A process killed with its group can take a
    moment to die on a busy machine, so it gets up to 10 s; one that lingers is killed."""
    deadline = time.monotonic() + 10
    while True:
        try:
            process = psutil.Process(pid)
            if process.status() == psutil.STATUS_ZOMBIE or process.cmdline() != cmdline:
                return False
        except psutil.NoSuchProcess:
            return False
        if time.monotonic() > deadline:
            process.kill()
            return True
        time.sleep(0.1)


def _logging_git(tmp_path: Path) -> tuple[str, Path]:
    """A PATH whose ``git`` logs its arguments to the returned file, then runs git."""
    calls = tmp_path / "git-calls"
    shim = tmp_path / "bin"
    shim.mkdir()
    real = next(
        Path(d) / "git" for d in os.environ["PATH"].split(os.pathsep) if (Path(d) / "git").is_file()
    )
    _script(shim / "git", f'echo "$*" >> {calls}\nexec {real} "$@"')
    return f"{shim}{os.pathsep}{os.environ['PATH']}", calls


def test_no_git_process_runs_outside_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, calls = _logging_git(tmp_path)
    monkeypatch.setenv("PATH", path)
    plain = tmp_path / "plain"
    plain.mkdir()
    observer = GitObserver(plain)
    marks = [observer.mark() for _ in range(3)]
    assert observer.repository is False
    assert all(m.entries is None for m in marks)
    assert observer.new_commits(marks[0], marks[1]) == []
    assert observer.changed_files(marks[0], marks[1]) is None
    assert not calls.exists()  # not even to ask whether it is one


def test_a_whole_run_outside_a_repository_starts_no_git(tmp_path: Path) -> None:
    path, calls = _logging_git(tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    args = ["run", "--agent", "command", "--max-iterations", "3", "-p", "x"]
    done = run_cli([*args, "--stagnation-limit", "0", "--", "true"], cwd=plain, env={"PATH": path})
    assert done.returncode == 3, done.stdout + done.stderr
    assert not calls.exists()


def test_a_repository_is_still_found_from_a_subfolder(repo: Path) -> None:
    inner = repo / "src" / "deep"
    inner.mkdir(parents=True)
    (inner / "new.txt").write_text("x")
    observer = GitObserver(inner)
    assert observer.repository is True
    assert observer.mark().entries is not None


def test_a_commit_on_another_branch_counts(repo: Path) -> None:
    observer = GitObserver(repo)
    before = observer.mark()
    home = git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "side")
    sha = _commit(repo, "work on a side branch")
    git(repo, "checkout", "-q", home)
    after = observer.mark()
    assert before.head == after.head
    assert [(c.sha, c.subject) for c in observer.new_commits(before, after)] == [
        (sha, "work on a side branch")
    ]
    assert progress_between(before, after) is Progress.MADE


def test_a_commit_on_a_detached_head_left_again_counts(repo: Path) -> None:
    observer = GitObserver(repo)
    before = observer.mark()
    home = git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(repo, "checkout", "-q", "--detach")
    sha = _commit(repo, "detached work")
    git(repo, "checkout", "-q", home)
    after = observer.mark()
    assert [c.sha for c in observer.new_commits(before, after)] == [sha]
    assert progress_between(before, after) is Progress.MADE


def test_commits_on_the_current_branch_come_oldest_first(repo: Path) -> None:
    observer = GitObserver(repo)
    before = observer.mark()
    first, second = _commit(repo, "one"), _commit(repo, "two")
    after = observer.mark()
    assert [c.sha for c in observer.new_commits(before, after)] == [first, second]


def test_a_stash_or_a_branch_switch_is_neither_a_commit_nor_progress(repo: Path) -> None:
    git(repo, "branch", "other")
    observer = GitObserver(repo)
    before = observer.mark()
    (repo / "README.md").write_text("changed\n")
    git(repo, "stash", "-q")
    git(repo, "checkout", "-q", "other")
    after = observer.mark()
    assert observer.new_commits(before, after) == []
    assert progress_between(before, after) is Progress.NONE


def test_checking_out_another_branch_is_not_progress(repo: Path) -> None:
    home = git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "other")
    _commit(repo, "older work on other")
    git(repo, "checkout", "-q", home)
    observer = GitObserver(repo)
    before = observer.mark()
    git(repo, "checkout", "-q", "other")
    after = observer.mark()
    assert before.head != after.head
    assert observer.new_commits(before, after) == []
    assert progress_between(before, after) is Progress.NONE
    _commit(repo, "new work on other")
    assert progress_between(before, observer.mark()) is Progress.MADE


def test_an_untracked_symlink_to_dev_zero_and_a_fifo_are_marked_without_reading(
    repo: Path,
) -> None:
    (repo / "zero").symlink_to("/dev/zero")
    os.mkfifo(repo / "pipe")
    mark = GitObserver(repo).mark()
    assert mark.entries is not None
    assert mark.entries["zero"].startswith("??:link:")


def test_git_never_prompts_and_takes_no_optional_locks(repo: Path) -> None:
    # What git and anything it starts see (an alias runs a shell under git).
    shown = run_git(repo, "-c", "alias.show-env=!env", "show-env").stdout.decode()
    env = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
    assert (env["GIT_TERMINAL_PROMPT"], env["GIT_OPTIONAL_LOCKS"]) == ("0", "0")


def test_the_tree_key_changes_with_what_a_checkpoint_would_take(repo: Path) -> None:
    observer = GitObserver(repo)
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".gitignore")
    _commit(repo, "ignore logs")
    (repo / "tool.sh").write_text("echo one\n")
    (repo / "README.md").write_text("changed\n")
    first = observer.mark()
    keys = [first.tree_key]
    (repo / "run.log").write_text("ignored, as by a checkpoint\n")
    assert observer.mark().tree_key == first.tree_key
    (repo / "tool.sh").chmod(0o755)  # an untracked file made executable: a change
    executable = observer.mark()
    assert executable.entries != first.entries
    assert observer.changed_paths(first, executable) == ["tool.sh"]
    keys.append(executable.tree_key)
    (repo / "tool.sh").write_text("echo two\n")  # same size
    keys.append(observer.mark().tree_key)
    git(repo, "add", "README.md")  # staged: its status record changes
    keys.append(observer.mark().tree_key)
    git(repo, "commit", "-q", "-m", "readme")
    keys.append(observer.mark().tree_key)
    assert None not in keys and len(set(keys)) == len(keys)
    git(repo, "init", "-q", "nested")  # a nested repository: the checkpoint records its commit
    nested = observer.mark()
    assert nested.tree_key is None and nested.entries is not None
    assert nested.entries["nested/"] == "??:dir"
