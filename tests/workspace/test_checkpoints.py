"""Checkpoints, diff and restore against real git: the user's git state is never touched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from autopilot.errors import GitUnavailableError, RepositoryError, UsageError
from autopilot.workspace.checkpoint_facts import FileChange
from autopilot.workspace.checkpoints import Checkpoints
from autopilot.workspace.repo import open_repository
from tests.workspace.gitstate import (
    files_of,
    git,
    install_failing_hooks,
    make_repo,
    user_git_state,
)

RUN_ID = "work-1796000000000"


def checkpoints_in(repo: Path, tmp_path: Path, run_id: str = RUN_ID) -> Checkpoints:
    return Checkpoints(open_repository(repo), run_id, tmp_path / "run" / "checkpoint.index")


def agent_iteration(repo: Path, number: int) -> set[str]:
    """What a busy agent does in one iteration: edit, add, delete, sometimes commit.
    Returns the paths it changed in the working tree."""
    changed = {f"src/file{number}.py", "notes.txt"}
    (repo / "src").mkdir(exist_ok=True)
    (repo / f"src/file{number}.py").write_text(f"print({number})\n")
    with (repo / "notes.txt").open("a") as notes:
        notes.write(f"iteration {number}\n")
    if number > 1 and (repo / f"src/file{number - 1}.py").exists() and number % 3 == 0:
        (repo / f"src/file{number - 1}.py").unlink()
        changed.add(f"src/file{number - 1}.py")
    (repo / f"debug{number}.log").write_text("ignored\n")
    if number % 2 == 0:
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"iteration {number}\n\nCo-authored-by: agent <a@b>")
    return changed


def test_ten_iterations_leave_the_users_git_state_untouched(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "wip.txt").write_text("uncommitted work\n")
    (repo / "README.md").write_text("project, edited\n")
    git(repo, "stash", "push", "-q", "--include-untracked", "-m", "old stash")
    (repo / "README.md").write_text("project, edited again\n")
    git(repo, "add", "README.md")
    store = checkpoints_in(repo, tmp_path)

    before = user_git_state(repo)
    baseline = store.take_baseline()
    assert user_git_state(repo) == before
    assert baseline.changes == (FileChange("M", "README.md"),)

    for number in range(1, 11):
        changed = agent_iteration(repo, number)
        before = user_git_state(repo)
        taken = store.take_iteration(number)
        assert user_git_state(repo) == before, f"iteration {number} changed the user's git"
        assert {change.path for change in taken.changes} == changed
        assert taken.checkpoint.files_changed == len(changed)

    names = [c.name for c in store.history()]
    assert names == ["baseline"] + [f"iter-{n:04d}" for n in range(1, 11)]
    assert [c.sequence for c in store.history()] == list(range(1, 12))
    # Ignored files are never in a checkpoint; the last tree holds the working tree.
    last = store.find_iteration(10)
    listed = git(repo, "ls-tree", "-r", "--name-only", last.tree).split()
    assert "debug10.log" not in listed
    assert "src/file10.py" in listed and "wip.txt" not in listed  # wip.txt is stashed
    assert git(repo, "stash", "list").count("old stash") == 1
    assert "refs/autopilot" not in git(repo, "log", "--all", "--format=%D", "-g", "HEAD")


def test_each_iterations_diff_holds_only_what_it_changed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    store = checkpoints_in(repo, tmp_path)
    store.take_baseline()
    for number in range(1, 5):
        agent_iteration(repo, number)
        store.take_iteration(number)
    for number in range(1, 5):
        new = store.find_iteration(number)
        patch = store.diff(store.before(new), new).decode()
        assert f"+print({number})" in patch
        assert f"+iteration {number}\n" in patch
        others = [n for n in range(1, 5) if n != number]
        assert not any(f"+print({n})" in patch for n in others)
    whole = store.diff(store.find_iteration(0), store.find_iteration(4)).decode()
    assert all(f"+iteration {n}" in whole for n in range(1, 5))
    stat = store.diff(store.find_iteration(0), store.find_iteration(1), stat=True).decode()
    assert "src/file1.py" in stat and "@@" not in stat


def test_restore_round_trip_keeps_branch_index_and_memory(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / ".autopilot").mkdir()
    memory = repo / ".autopilot/memory.md"
    memory.write_text("decision 0\n")
    store = checkpoints_in(repo, tmp_path)
    store.take_baseline()
    trees = {}
    for number in range(1, 5):
        agent_iteration(repo, number)
        memory.write_text(memory.read_text() + f"decision {number}\n")
        store.take_iteration(number)
        trees[number] = files_of(repo)
    (repo / "scratch.log").write_text("ignored, kept\n")
    head, branch = git(repo, "rev-parse", "HEAD"), git(repo, "symbolic-ref", "HEAD")
    before = user_git_state(repo)
    current = files_of(repo)

    result = store.restore(store.find_iteration(2))

    assert result.safety.name == "before-restore-0001"
    assert result.result is not None and result.result.name == "restore-0001"
    assert result.kept == (".autopilot/memory.md",)
    expected = dict(trees[2])
    expected[".autopilot/memory.md"] = current[".autopilot/memory.md"]
    expected["scratch.log"] = b"ignored, kept\n"
    expected.update({k: v for k, v in current.items() if k.endswith(".log")})
    assert files_of(repo) == expected
    assert {c.path for c in result.changes} == {
        p for p in set(current) | set(expected) if current.get(p) != expected.get(p)
    }
    assert user_git_state(repo) == before
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "symbolic-ref", "HEAD") == branch

    undo = store.restore(store.find(result.safety.name))
    assert files_of(repo) == current
    assert undo.safety.name == "before-restore-0002"
    assert user_git_state(repo) == before
    # An iteration after a restore is diffed against the restored tree.
    (repo / "after.txt").write_text("after\n")
    taken = store.take_iteration(5)
    assert taken.changes == (FileChange("A", "after.txt"),)


def test_restore_keeps_every_record_and_diff_leaves_them_out(tmp_path: Path) -> None:
    # A backlog run: the item is claimed before the iteration's checkpoint and
    # concluded after it; a restore must not bring the claim back.
    repo = make_repo(tmp_path / "repo")
    records = (".autopilot/tasks.jsonl", "sub/.autopilot/tasks.jsonl")
    for folder in (repo / ".autopilot", repo / "sub/.autopilot"):
        folder.mkdir(parents=True)
    for path in records:
        (repo / path).write_text('{"id": "a", "status": "ready"}\n')
    (repo / ".autopilot/config.toml").write_text("max-iterations = 5\n")
    store = checkpoints_in(repo, tmp_path)
    store.take_baseline()
    (repo / "code.py").write_text("one\n")
    for path in records:
        (repo / path).write_text('{"id": "a", "status": "running"}\n')
    (repo / ".autopilot/config.toml").write_text("max-iterations = 9\n")
    store.take_iteration(1)
    patch = store.diff(store.find_iteration(0), store.find_iteration(1)).decode()
    assert "code.py" in patch and "max-iterations = 9" in patch
    assert "tasks.jsonl" not in patch
    (repo / "code.py").write_text("two\n")
    for path in records:
        (repo / path).write_text('{"id": "a", "status": "done"}\n')
    (repo / ".autopilot/approved-run.json").write_text("{}\n")
    (repo / ".autopilot/OFF").write_text("")
    (repo / ".autopilot/consistency-decision.applied.json").write_text("{}\n")
    (repo / ".autopilot/config.toml").write_text("max-iterations = 12\n")
    kept = {path: (repo / path).read_bytes() for path in records}

    result = store.restore(store.find_iteration(1))

    assert (repo / "code.py").read_text() == "one\n"
    assert (repo / ".autopilot/config.toml").read_text() == "max-iterations = 9\n"
    assert {path: (repo / path).read_bytes() for path in records} == kept
    for name in ("approved-run.json", "OFF", "consistency-decision.applied.json"):
        assert (repo / ".autopilot" / name).exists(), name
    assert {c.path for c in result.changes} == {"code.py", ".autopilot/config.toml"}
    assert result.kept == (
        ".autopilot/OFF",
        ".autopilot/approved-run.json",
        ".autopilot/consistency-decision.applied.json",
        ".autopilot/tasks.jsonl",
        "sub/.autopilot/tasks.jsonl",
    )
    # Back to the baseline, which had no OFF: the pause stays.
    store.restore(store.find_iteration(0))
    assert (repo / ".autopilot/OFF").exists()
    assert (repo / ".autopilot/tasks.jsonl").read_bytes() == kept[".autopilot/tasks.jsonl"]
    assert not (repo / "code.py").exists()


def test_restore_refuses_an_untracked_file_in_the_way_and_changes_nothing(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    store = checkpoints_in(repo, tmp_path)
    (repo / "build").mkdir()
    (repo / "kept.txt").write_text("one\n")
    store.take_baseline()
    (repo / "kept.txt").unlink()
    store.take_iteration(1)
    # An ignored file now sits where the baseline has a tracked one.
    (repo / ".gitignore").write_text("*.log\nbuild/\nkept.txt\n")
    (repo / "kept.txt").write_text("precious, ignored\n")
    before = files_of(repo)
    with pytest.raises(RepositoryError, match="cannot restore baseline"):
        store.restore(store.find_iteration(0))
    assert files_of(repo) == before


def test_checkpoints_run_no_hook_and_no_fsmonitor(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "hooks-ran"
    install_failing_hooks(repo, marker)
    store = checkpoints_in(repo, tmp_path)
    store.take_baseline()
    (repo / "a.txt").write_text("a\n")
    store.take_iteration(1)
    store.restore(store.find_iteration(0))
    assert not marker.exists()
    assert not (repo / "a.txt").exists()


def test_a_repository_with_no_commit_and_a_subdirectory(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", commit=False)
    (repo / "sub").mkdir()
    (repo / "sub/a.txt").write_text("a\n")
    store = Checkpoints(open_repository(repo / "sub"), RUN_ID, tmp_path / "idx")
    taken = store.take_baseline()
    assert taken.checkpoint.head is None
    assert taken.changes == (FileChange("A", "sub/a.txt"),)
    assert git(repo, "rev-list", "--count", "--all").strip() == "1"  # only ours
    with pytest.raises(Exception, match="HEAD"):
        git(repo, "rev-parse", "--verify", "HEAD")


def test_a_damaged_run_index_is_rebuilt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    store = checkpoints_in(repo, tmp_path)
    store.take_baseline()
    store.index_path.write_bytes(b"DIRC garbage")
    (repo / "new.txt").write_text("new\n")
    taken = store.take_iteration(1)
    assert taken.changes == (FileChange("A", "new.txt"),)


def test_delete_all_removes_only_this_runs_refs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    mine, other = checkpoints_in(repo, tmp_path), checkpoints_in(repo, tmp_path, "other-1")
    mine.take_baseline()
    other.take_baseline()
    mine.take_iteration(1)
    assert mine.delete_all() == 2
    assert mine.history() == []
    assert [c.name for c in other.history()] == ["baseline"]


def test_unknown_checkpoints_are_usage_errors(tmp_path: Path) -> None:
    store = checkpoints_in(make_repo(tmp_path / "repo"), tmp_path)
    store.take_baseline()
    with pytest.raises(UsageError, match="no checkpoint of iteration 3"):
        store.find_iteration(3)
    with pytest.raises(UsageError, match="no checkpoint 'iter-9'"):
        store.find("iter-9")


def test_bad_repositories_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(RepositoryError, match="is not in a git repository"):
        open_repository(plain)
    with pytest.raises(RepositoryError, match="does not exist"):
        open_repository(tmp_path / "missing")
    git(tmp_path, "init", "-q", "--bare", "bare.git")
    with pytest.raises(RepositoryError, match="bare git repository"):
        open_repository(tmp_path / "bare.git")
    empty_path = tmp_path / "bin"
    empty_path.mkdir()
    monkeypatch.setenv("PATH", str(empty_path))
    with pytest.raises(GitUnavailableError, match="git is not installed"):
        open_repository(plain)
    assert shutil.which("git") is None
    assert os.environ["PATH"] == str(empty_path)


def test_restore_across_a_file_that_became_a_folder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    store = checkpoints_in(repo, tmp_path)
    (repo / "thing").write_text("a file\n")
    (repo / "folder").mkdir()
    (repo / "folder/inside.txt").write_text("inside\n")
    store.take_baseline()
    first = files_of(repo)
    (repo / "thing").unlink()
    (repo / "thing").mkdir()
    (repo / "thing/now.txt").write_text("now a folder\n")
    (repo / "folder/inside.txt").unlink()
    (repo / "folder").rmdir()
    (repo / "folder").write_text("now a file\n")
    store.take_iteration(1)
    second = files_of(repo)
    store.restore(store.find_iteration(0))
    assert files_of(repo) == first
    store.restore(store.find_iteration(1))
    assert files_of(repo) == second
    (repo / "build").mkdir()
    (repo / "build/out.bin").write_text("ignored output\n")
    store.take_iteration(2)
    (repo / "build/out.bin").unlink()
    (repo / "build").rmdir()
    (repo / "build").write_text("a tracked file where build/ was\n")  # ignored? no: a file
    store.take_iteration(3)
    (repo / "build").unlink()
    (repo / "build").mkdir()
    (repo / "build/out.bin").write_text("ignored output, again\n")
    with pytest.raises(RepositoryError, match=r"ignored files are where it has files \(build\)"):
        store.restore(store.find_iteration(3))
    assert (repo / "build/out.bin").read_text() == "ignored output, again\n"


def test_the_run_index_stays_private_whatever_the_umask(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    store = checkpoints_in(repo, tmp_path)
    old_umask = os.umask(0o022)
    try:
        store.take_baseline()
        assert store.index_path.stat().st_mode & 0o777 == 0o600
        (repo / "new.txt").write_text("new\n")
        store.take_iteration(1)
        assert store.index_path.stat().st_mode & 0o777 == 0o600
        store.restore(store.find("baseline"))
        assert store.index_path.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old_umask)
    assert not (repo / "new.txt").exists()
