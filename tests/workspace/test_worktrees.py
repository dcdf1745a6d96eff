"""Run worktrees and merging back, against real git: a conflict changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from autopilot.errors import MergeConflictError, RepositoryError
from autopilot.workspace.merge import MergeMode, merge_back
from autopilot.workspace.records import hide_records
from autopilot.workspace.repo import open_repository
from autopilot.workspace.worktrees import (
    branch_is_merged,
    create_worktree,
    delete_branch,
    remove_worktree,
    run_branches,
    run_worktrees,
)
from tests.workspace.gitstate import files_of, git, install_failing_hooks, make_repo, user_git_state


def commit_in(where: Path, name: str, text: str, message: str) -> None:
    (where / name).parent.mkdir(parents=True, exist_ok=True)
    (where / name).write_text(text)
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", message)


def worktree_for(repo: Path, tmp_path: Path, run_id: str) -> tuple[Path, str]:
    made, warnings = create_worktree(open_repository(repo), tmp_path / "wt" / run_id, run_id)
    assert warnings == []
    return made.path, made.branch


def test_a_worktree_run_says_what_it_leaves_behind_where_the_user_typed_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from autopilot.config import RunConfig
    from autopilot.loop.arming import arm_run
    from autopilot.loop.clock import SystemClock
    from autopilot.store.events import read_events
    from autopilot.store.run_state import PromptSource

    repo = make_repo(tmp_path / "repo")
    (repo / "notes.txt").write_text("mine\n")
    root = tmp_path / "runs"
    root.mkdir()
    run_id = arm_run(root, RunConfig(), PromptSource(text="w"), repo, SystemClock(), worktree=True)
    head = git(repo, "rev-parse", "HEAD").strip()
    note = f"1 untracked file in {repo} is not in the worktree (it starts from HEAD {head[:12]})"
    assert capsys.readouterr().err == f"autopilot: warning: {note}\n"
    warnings = [e for e in read_events(root / run_id / "events.jsonl") if e["type"] == "warning"]
    assert [w["note"] for w in warnings] == [note]


def test_untracked_and_uncommitted_files_warn_but_never_block(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "tmp").mkdir()
    (repo / "tmp/handoff.md").write_text("scratch\n")
    (repo / "README.md").write_text("edited\n")
    git(repo, "stash", "push", "-q", "-m", "old")  # a stash never counts
    (repo / "README.md").write_text("edited again\n")
    before_files, before_git = files_of(repo), user_git_state(repo)

    made, warnings = create_worktree(open_repository(repo), tmp_path / "wt" / "r-1", "r-1")

    assert warnings == [
        f"1 uncommitted change and 1 untracked file in {repo} are not in the worktree "
        f"(it starts from HEAD {made.base[:12]})"
    ]
    assert made.branch == "autopilot/r-1"
    assert made.base == git(repo, "rev-parse", "HEAD").strip()
    assert (made.path / "README.md").read_text() == "project\n"
    assert not (made.path / "tmp").exists()
    assert files_of(repo) == before_files
    changed = {
        k
        for k in set(before_git) | set(user_git_state(repo))
        if before_git.get(k) != user_git_state(repo).get(k)
    }
    assert changed == {"refs/heads/autopilot/r-1", "logs/refs/heads/autopilot/r-1"}


def test_worktree_bad_input(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    origin = open_repository(repo)
    create_worktree(origin, tmp_path / "wt" / "a-1", "a-1")
    with pytest.raises(RepositoryError, match="branch autopilot/a-1 already exists"):
        create_worktree(origin, tmp_path / "wt" / "other", "a-1")
    (tmp_path / "taken").mkdir()
    with pytest.raises(RepositoryError, match=r"worktree path .*taken already exists"):
        create_worktree(origin, tmp_path / "taken", "b-1")
    with pytest.raises(RepositoryError, match="is inside the checkout"):
        create_worktree(origin, repo / "inside", "c-1")
    empty = make_repo(tmp_path / "empty", commit=False)
    with pytest.raises(RepositoryError, match="has no commits yet"):
        create_worktree(open_repository(empty), tmp_path / "wt" / "d-1", "d-1")
    assert run_branches(origin) == ["autopilot/a-1"]


def test_two_runs_at_once_both_merge_back(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first, first_branch = worktree_for(repo, tmp_path, "one-1")
    second, second_branch = worktree_for(repo, tmp_path, "two-2")
    assert [w.branch for w in run_worktrees(open_repository(repo))] == [first_branch, second_branch]
    commit_in(first, "one.txt", "one\n", "run one")
    commit_in(second, "two.txt", "two\n", "run two")
    commit_in(second, "two-more.txt", "more\n", "run two again")
    checkout = open_repository(repo)

    done_first = merge_back(checkout, first_branch, MergeMode.MERGE, message="merge one")
    assert done_first.merged and done_first.files == ("one.txt",)
    assert done_first.after == git(repo, "rev-parse", first_branch).strip()  # fast-forward

    done_second = merge_back(checkout, second_branch, MergeMode.MERGE, message="merge two")
    assert set(done_second.files) == {"two.txt", "two-more.txt"}
    parents = git(repo, "log", "-1", "--format=%P").split()
    assert parents == [done_first.after, git(repo, "rev-parse", second_branch).strip()]
    assert git(repo, "log", "-1", "--format=%s").strip() == "merge two"
    assert {"one.txt", "two.txt", "two-more.txt"} <= set(files_of(repo))
    assert git(repo, "status", "--porcelain") == ""
    assert "autopilot merge autopilot/two-2" in git(repo, "reflog", "-1", "main")
    assert branch_is_merged(checkout, first_branch) and branch_is_merged(checkout, second_branch)


@pytest.mark.parametrize("mode", [MergeMode.SQUASH, MergeMode.REBASE])
def test_squash_and_rebase(tmp_path: Path, mode: MergeMode) -> None:
    repo = make_repo(tmp_path / "repo")
    place, branch = worktree_for(repo, tmp_path, "run-1")
    commit_in(place, "a.txt", "a\n", "first")
    commit_in(place, "b.txt", "b\n", "second")
    commit_in(repo, "user.txt", "user\n", "the user's own")
    (repo / "README.md").write_text("uncommitted, unrelated\n")
    checkout = open_repository(repo)

    done = merge_back(checkout, branch, mode, message="autopilot: merge run run-1")

    subjects = git(repo, "log", "--format=%s", "-4").split("\n")
    if mode is MergeMode.SQUASH:
        assert subjects[:2] == ["autopilot: merge run run-1", "the user's own"]
        assert git(repo, "log", "-1", "--format=%P").split() == [done.before]
    else:
        assert subjects[:3] == ["second", "first", "the user's own"]
        assert branch_is_merged(checkout, branch)
    assert set(done.files) == {"a.txt", "b.txt"}
    assert (repo / "README.md").read_text() == "uncommitted, unrelated\n"
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert len(git(repo, "worktree", "list").splitlines()) == 2  # no scratch worktree left


@pytest.mark.parametrize("mode", list(MergeMode))
def test_a_conflicting_merge_changes_nothing(tmp_path: Path, mode: MergeMode) -> None:
    repo = make_repo(tmp_path / "repo")
    place, branch = worktree_for(repo, tmp_path, "run-1")
    commit_in(place, "README.md", "the run's version\n", "run edits README")
    commit_in(place, "clean.txt", "no conflict\n", "run adds a file")
    commit_in(repo, "README.md", "the user's version\n", "user edits README")
    (repo / "notes.txt").write_text("untracked\n")
    before_files, before_git = files_of(repo), user_git_state(repo)
    branch_tip = git(repo, "rev-parse", branch)

    with pytest.raises(MergeConflictError, match=r"conflicts in README\.md") as raised:
        merge_back(open_repository(repo), branch, mode, message="m")

    assert raised.value.files == ("README.md",)
    assert "nothing was changed and autopilot/run-1 is kept" in str(raised.value)
    assert files_of(repo) == before_files
    assert user_git_state(repo) == before_git
    assert git(repo, "rev-parse", branch) == branch_tip
    assert len(git(repo, "worktree", "list").splitlines()) == 2


def test_merge_bad_input_changes_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    place, branch = worktree_for(repo, tmp_path, "run-1")
    commit_in(place, "a.txt", "run\n", "run")
    checkout = open_repository(repo)

    (repo / "a.txt").write_text("the user's untracked a.txt\n")
    with pytest.raises(
        RepositoryError,
        match=r"^cannot merge autopilot/run-1: it changes a file that is modified or untracked "
        r"in .* \(a\.txt\); commit, stash or move it away first; nothing was changed$",
    ):
        merge_back(checkout, branch, MergeMode.MERGE, message="m")
    (repo / "a.txt").unlink()

    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    with pytest.raises(RepositoryError, match="has staged changes"):
        merge_back(checkout, branch, MergeMode.MERGE, message="m")
    git(repo, "reset", "-q")

    with pytest.raises(RepositoryError, match="branch autopilot/nope does not exist"):
        merge_back(checkout, "autopilot/nope", MergeMode.MERGE, message="m")

    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(RepositoryError, match="HEAD is detached"):
        merge_back(checkout, branch, MergeMode.MERGE, message="m")
    git(repo, "checkout", "-q", "main")
    assert git(repo, "log", "--format=%s") == "start\n"


def test_nothing_to_merge_and_no_identity(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    place, branch = worktree_for(repo, tmp_path, "run-1")
    checkout = open_repository(repo)
    done = merge_back(checkout, branch, MergeMode.MERGE, message="m")
    assert not done.merged

    commit_in(place, "a.txt", "a\n", "run")
    commit_in(repo, "b.txt", "b\n", "user")
    git(repo, "config", "--unset", "user.email")
    git(repo, "config", "--unset", "user.name")
    home = tmp_path / "home"
    home.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        patch.setenv("EMAIL", "")
        before = user_git_state(repo), files_of(repo)
        for mode in MergeMode:
            with pytest.raises(RepositoryError, match="git does not know who you are"):
                merge_back(checkout, branch, mode, message="m")
        assert (user_git_state(repo), files_of(repo)) == before


def test_a_worktree_keeps_autopilots_records_out_of_git_add_all(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    place, branch = worktree_for(repo, tmp_path, "run-1")
    assert hide_records(place) and not hide_records(place)  # a file there is left
    (place / ".autopilot/memory.md").write_text("run notes\n")
    (place / ".autopilot/OFF").write_text("")
    (place / ".autopilot/consistency-decision.applied.json").write_text("{}\n")
    (place / ".autopilot/config.toml").write_text("max-iterations = 3\n")
    commit_in(place, "work.txt", "work\n", "the agent's commit")
    committed = git(repo, "ls-tree", "-r", "--name-only", branch).split()
    assert ".autopilot/config.toml" in committed and "work.txt" in committed
    assert not [p for p in committed if p.startswith(".autopilot/") and "config" not in p]
    assert git(place, "status", "--porcelain", "--untracked-files=all") == ""


@pytest.mark.parametrize("mode", list(MergeMode))
def test_merge_never_brings_a_branchs_records(tmp_path: Path, mode: MergeMode) -> None:
    # An agent that force-adds autopilot's records: the user's branch keeps its own.
    repo = make_repo(tmp_path / "repo")
    commit_in(repo, ".autopilot/tasks.jsonl", "the user's queue\n", "user's backlog")
    place, branch = worktree_for(repo, tmp_path, "run-1")
    commit_in(place, ".autopilot/memory.md", "run notes\n", "agent adds memory")
    commit_in(place, ".autopilot/tasks.jsonl", "the run's copy\n", "agent edits backlog")
    commit_in(place, "work.txt", "work\n", "agent's work")
    if mode is not MergeMode.MERGE:
        commit_in(repo, "user.txt", "user\n", "the user's own")
    (repo / ".autopilot/memory.md").write_text("the checkout's memory, untracked\n")
    (repo / ".autopilot/tasks.jsonl").write_text("claimed by a run, uncommitted\n")
    checkout = open_repository(repo)

    done = merge_back(checkout, branch, mode, message="autopilot: merge run run-1")

    assert done.merged and done.files == ("work.txt",)
    assert done.left_out == (".autopilot/memory.md", ".autopilot/tasks.jsonl")
    tree = git(repo, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert ".autopilot/memory.md" not in tree and "work.txt" in tree
    assert git(repo, "show", "HEAD:.autopilot/tasks.jsonl") == "the user's queue\n"
    assert (repo / ".autopilot/memory.md").read_text() == "the checkout's memory, untracked\n"
    assert (repo / ".autopilot/tasks.jsonl").read_text() == "claimed by a run, uncommitted\n"
    assert (repo / "work.txt").read_text() == "work\n"
    assert git(repo, "diff", "--cached", "--name-only") == ""


def test_records_in_conflict_or_alone_are_left_out(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    commit_in(repo, ".autopilot/memory.md", "shared\n", "user's memory")
    place, branch = worktree_for(repo, tmp_path, "run-1")
    commit_in(place, ".autopilot/memory.md", "the run's\n", "agent's memory")
    commit_in(repo, ".autopilot/memory.md", "the user's\n", "user's memory again")
    checkout = open_repository(repo)
    head = git(repo, "rev-parse", "HEAD")

    alone = merge_back(checkout, branch, MergeMode.MERGE, message="m")
    assert not alone.merged and alone.left_out == (".autopilot/memory.md",)
    assert git(repo, "rev-parse", "HEAD") == head

    commit_in(place, "work.txt", "work\n", "agent's work")
    done = merge_back(checkout, branch, MergeMode.MERGE, message="m")
    assert done.merged and done.files == ("work.txt",)
    assert (repo / ".autopilot/memory.md").read_text() == "the user's\n"
    assert (
        git(repo, "log", "-1", "--format=%P").split()[1] == git(repo, "rev-parse", branch).strip()
    )


def test_merging_runs_no_hook(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "hooks-ran"
    install_failing_hooks(repo, marker)
    checkout = open_repository(repo)
    made, _ = create_worktree(checkout, tmp_path / "wt" / "r-1", "r-1")
    quiet = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
    git(made.path, *quiet, "commit", "-q", "--allow-empty", "-m", "x")
    git(repo, *quiet, "commit", "-q", "--allow-empty", "-m", "y")
    done = merge_back(checkout, made.branch, MergeMode.REBASE, message="m")
    assert git(repo, "log", "--format=%s", "-3").split() == ["x", "y", "start"]
    assert done.merged
    assert not marker.exists()


def test_remove_worktree_keeps_uncommitted_work_and_merged_branches_go(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    checkout = open_repository(repo)
    place, branch = worktree_for(repo, tmp_path, "run-1")
    (place / "unsaved.txt").write_text("work\n")
    with pytest.raises(RepositoryError, match="was kept"):
        remove_worktree(checkout, place)
    assert (place / "unsaved.txt").exists()
    (place / "unsaved.txt").unlink()
    remove_worktree(checkout, place)
    assert not place.exists()
    assert branch_is_merged(checkout, branch)
    delete_branch(checkout, branch)
    assert run_branches(checkout) == []

    gone, _ = worktree_for(repo, tmp_path, "run-2")
    commit_in(gone, "x.txt", "x\n", "unmerged")
    assert not branch_is_merged(checkout, "autopilot/run-2")
    for path in sorted(gone.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    gone.rmdir()
    assert [w.prunable for w in run_worktrees(checkout)] == [True]
    remove_worktree(checkout, gone)
    assert run_worktrees(checkout) == []
