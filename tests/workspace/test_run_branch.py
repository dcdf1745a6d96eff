"""A ``--worktree`` run's branch an agent deleted is made again at the worktree's HEAD
commit, with a warning, so the run's commits are never stranded (real git)."""

from __future__ import annotations

from pathlib import Path

from autopilot.workspace.repo import open_repository
from autopilot.workspace.worktrees import create_worktree, restore_run_branch
from tests.conftest import FakeAgent, read_jsonl, run_cli
from tests.workspace.gitstate import git, make_repo
from tests.workspace.test_run_git import QUIET_GIT, run_dir_of


def _worktree(tmp_path: Path) -> tuple[Path, Path, str]:
    repo = make_repo(tmp_path / "repo")
    place, _ = create_worktree(open_repository(repo), tmp_path / "wt", "r-1")
    (place.path / "work.txt").write_text("work\n")
    git(place.path, "add", "work.txt")
    git(place.path, "commit", "-q", "-m", "the agent's work")
    return repo, place.path, place.branch


def _tip(where: Path, ref: str) -> str:
    return git(where, "rev-parse", ref).strip()


def test_a_branch_deleted_under_its_checked_out_head_is_made_again(tmp_path: Path) -> None:
    _, worktree, branch = _worktree(tmp_path)
    work = _tip(worktree, "HEAD")
    git(worktree, "update-ref", "-d", f"refs/heads/{branch}")  # HEAD names nothing now

    note = restore_run_branch(open_repository(worktree), branch)

    assert note == f"the run's branch {branch} was deleted; made again at {work[:12]}, checked out"
    assert _tip(worktree, branch) == work
    assert git(worktree, "symbolic-ref", "--short", "HEAD").strip() == branch
    assert git(worktree, "status", "--porcelain") == ""
    assert restore_run_branch(open_repository(worktree), branch) is None  # there now


def test_a_branch_deleted_from_a_detached_head_is_made_again_there(tmp_path: Path) -> None:
    _, worktree, branch = _worktree(tmp_path)
    git(worktree, "checkout", "-q", "--detach")
    git(worktree, "branch", "-q", "-D", branch)
    (worktree / "more.txt").write_text("more\n")
    git(worktree, "add", "more.txt")
    git(worktree, "commit", "-q", "-m", "more work, detached")
    work = _tip(worktree, "HEAD")

    assert restore_run_branch(open_repository(worktree), branch) is not None

    assert _tip(worktree, branch) == work
    assert git(worktree, "symbolic-ref", "--short", "HEAD").strip() == branch


def test_a_branch_deleted_after_a_switch_is_made_again_and_head_left_there(
    tmp_path: Path,
) -> None:
    _, worktree, branch = _worktree(tmp_path)
    git(worktree, "checkout", "-q", "-b", "other")
    git(worktree, "branch", "-q", "-D", branch)

    note = restore_run_branch(open_repository(worktree), branch)

    assert note is not None and note.endswith("(HEAD is on other)")
    assert _tip(worktree, branch) == _tip(worktree, "other")
    assert git(worktree, "symbolic-ref", "--short", "HEAD").strip() == "other"


def test_a_worktree_run_whose_agent_deletes_its_branch_keeps_its_work(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    delete = (
        f"b=$({QUIET_GIT} symbolic-ref --short HEAD) && {QUIET_GIT} checkout -q --detach"
        f' && {QUIET_GIT} branch -q -D "$b"'
    )
    commit = f"echo a > a.txt && {QUIET_GIT} add -A && {QUIET_GIT} commit -q -m one"
    env = fake_agent(
        [[{"shell": f"{commit} && {delete}"}, {"result": "committed"}], [{"result": "COMPLETE"}]]
    )

    done = run_cli(["run", "-p", "work", "--worktree", "--max-iterations", "4"], cwd=repo, env=env)

    assert done.returncode == 0, done.stderr
    folder = run_dir_of(tmp_path)
    branch = f"autopilot/{folder.name}"
    warnings = [e for e in read_jsonl(folder / "events.jsonl") if e["type"] == "warning"]
    assert [(w["iteration"], w["note"].split(";")[0]) for w in warnings] == [
        (1, f"the run's branch {branch} was deleted")
    ]
    assert git(repo, "log", "-1", "--format=%s", branch).strip() == "one"
    merged = run_cli(["merge", folder.name], cwd=repo)
    assert merged.returncode == 0, merged.stderr
    assert (repo / "a.txt").read_text() == "a\n"
