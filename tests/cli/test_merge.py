"""``autopilot merge`` of a --worktree run: what it says, and what it never does to the
user's checkout."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from autopilot.workspace.repo import open_repository
from autopilot.workspace.worktrees import create_worktree
from tests.conftest import run_cli
from tests.manage.runs import make_run
from tests.workspace.gitstate import files_of, git, make_repo, user_git_state


def worktree_run(
    tmp_path: Path, repo: Path, label: str = "wt", started_ms: int = 1_796_000_000_000
) -> tuple[str, Path]:
    """A finished --worktree run whose branch adds ``<label>.txt``, with the memory file
    autopilot keeps in its worktree."""
    run_id = f"{label}-{started_ms}"
    made, _ = create_worktree(open_repository(repo), tmp_path / "worktrees" / run_id, run_id)
    (made.path / f"{label}.txt").write_text(f"{label}\n")
    git(made.path, "add", "-A")
    git(made.path, "commit", "-q", "-m", label)
    (made.path / ".autopilot").mkdir()
    (made.path / ".autopilot" / "memory.md").write_text("# Memory\n")
    make_run(
        tmp_path / "runs",
        label,
        started_ms,
        terminal=("complete", "completion_promise"),
        state={"cwd": str(made.path), "worktree": made.to_json()},
    )
    return run_id, made.path


def test_the_memory_file_is_not_reported_as_unmerged_work(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id, _ = worktree_run(tmp_path, repo)
    done = run_cli(["merge", run_id], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"merged autopilot/{run_id} into main (merge): 1 file changed, "
        f"now at {git(repo, 'rev-parse', 'HEAD').strip()[:12]} "
        f"(was {git(repo, 'rev-parse', 'HEAD~1').strip()[:12]})\n"
    )
    other_id, other_place = worktree_run(tmp_path, repo, "other", 1_796_000_000_001)
    (other_place / "draft.txt").write_text("not committed\n")
    other = run_cli(["merge", other_id], cwd=repo)
    assert other.returncode == 0, other.stderr
    assert other.stdout.splitlines()[-1] == (
        f"note: 1 uncommitted file(s) in {other_place} were not merged "
        "(only commits on the branch are)"
    )


def wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    """Until ``path`` exists (a test's generous deadline, not a timing claim)."""
    deadline = time.monotonic() + 60
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_second_merge_into_the_same_checkout_is_refused_at_once(tmp_path: Path) -> None:
    """While one merge is under way (its --verify running), another run's merge into
    the same checkout is one line, exit 4, and changes nothing; afterwards it merges."""
    repo = make_repo(tmp_path / "repo")
    first, _ = worktree_run(tmp_path, repo, "first", 1_796_000_000_000)
    second, _ = worktree_run(tmp_path, repo, "second", 1_796_000_000_001)
    started, go = tmp_path / "started", tmp_path / "go"
    hold = f"touch {started}; while [ ! -f {go} ]; do sleep 0.05; done"
    merging = subprocess.Popen(
        [sys.executable, "-m", "autopilot", "merge", first, "--verify", hold],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(started, merging)
        before = files_of(repo), user_git_state(repo)
        refused = run_cli(["merge", second], cwd=repo)
        assert refused.returncode == 4, refused.stderr
        assert refused.stderr == (
            f"autopilot: error: another autopilot merge (run {first}, pid {merging.pid}) is "
            f"under way into {repo}; nothing was changed; merge again once it is done\n"
        )
        assert (files_of(repo), user_git_state(repo)) == before
    finally:
        go.touch()
        out, err = merging.communicate(timeout=120)
    assert merging.returncode == 0, err
    assert f"merged autopilot/{first} into main" in out
    again = run_cli(["merge", second], cwd=repo)
    assert again.returncode == 0, again.stderr
    assert (repo / "first.txt").exists() and (repo / "second.txt").exists()
    assert git(repo, "status", "--porcelain") == ""


def test_a_branch_that_cannot_move_gets_its_files_back_and_no_reset_hint(
    tmp_path: Path,
) -> None:
    """The user's branch cannot be moved (its ref is locked): the files the merge wrote
    go back, and the line names no command that would move the branch by hand."""
    repo = make_repo(tmp_path / "repo")
    run_id, _ = worktree_run(tmp_path, repo)
    (repo / "README.md").write_text("the user's uncommitted edit\n")
    head = git(repo, "rev-parse", "HEAD")
    before = files_of(repo)
    (repo / ".git" / "refs" / "heads" / "main.lock").write_text("")
    done = run_cli(["merge", run_id], cwd=repo)
    assert done.returncode == 4, done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"autopilot: error: cannot move main in {repo} (")
    assert done.stderr.endswith("; its files were put back and nothing was changed\n")
    assert "reset" not in done.stderr
    (repo / ".git" / "refs" / "heads" / "main.lock").unlink()
    assert files_of(repo) == before
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "status", "--porcelain") == " M README.md\n"


def test_a_merge_never_overwrites_an_ignored_file(tmp_path: Path) -> None:
    """The run's branch adds ``notes.log``; the checkout has its own, ignored (``*.log``):
    the merge is refused naming it, and nothing of the user's changes (restore refuses
    the same way)."""
    repo = make_repo(tmp_path / "repo")
    run_id, place = worktree_run(tmp_path, repo)
    (place / "notes.log").write_text("the run's notes\n")
    (place / "build").mkdir()
    (place / "build" / "out.txt").write_text("the run's build\n")
    git(place, "add", "-f", "notes.log", "build/out.txt")
    git(place, "commit", "-q", "-m", "notes")
    (repo / "notes.log").write_text("the user's own notes, never committed\n")
    before = files_of(repo), user_git_state(repo)
    done = run_cli(["merge", run_id, "--verify", f"touch {tmp_path / 'verified'}"], cwd=repo)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"autopilot: error: files git does not track (ignored ones) in {repo} are where "
        f"autopilot/{run_id} adds files (notes.log); move them away first; nothing was "
        "changed\n"
    )
    assert (files_of(repo), user_git_state(repo)) == before
    assert not (tmp_path / "verified").exists()  # refused before any check ran
    (repo / "notes.log").unlink()
    (repo / "build").mkdir()
    (repo / "build" / "cache.bin").write_text("the user's ignored build cache\n")
    merged = run_cli(["merge", run_id], cwd=repo)  # beside an ignored file is no harm
    assert merged.returncode == 0, merged.stderr
    assert (repo / "notes.log").read_text() == "the run's notes\n"
    assert (repo / "build" / "cache.bin").read_text() == "the user's ignored build cache\n"


def diverged_run(tmp_path: Path, repo: Path) -> str:
    """A run whose merge is a merge commit, so ``--verify`` runs in a temporary tree."""
    run_id, _ = worktree_run(tmp_path, repo)
    (repo / "other.txt").write_text("the user's own work\n")
    git(repo, "add", "other.txt")
    git(repo, "commit", "-q", "-m", "other")
    return run_id


def start_merge(repo: Path, run_id: str, verify: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "autopilot", "merge", run_id, "--verify", verify],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def pids_in(path: Path, process: subprocess.Popen[str]) -> list[int]:
    """The pids a verify command wrote to ``path``, once it has written them all."""
    wait_for(path.with_suffix(".done"), process)
    return [int(word) for word in path.read_text().split()]


def gone(pid: int) -> bool:
    """Until a generous deadline: has ``pid`` exited (a zombie awaiting init counts)?"""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_stopped_merge_verify_ends_its_commands_and_removes_its_tree(tmp_path: Path) -> None:
    """SIGTERM to a merge whose --verify runs: the command's whole process group ends,
    the temporary worktree goes, exit 130 with one line, nothing changed."""
    repo = make_repo(tmp_path / "repo")
    run_id = diverged_run(tmp_path, repo)
    pids = tmp_path / "pids"
    verify = f"echo $$ > {pids}; sleep 300 & echo $! >> {pids}; touch {pids}.done; wait"
    before = files_of(repo), git(repo, "rev-parse", "HEAD")
    merging = start_merge(repo, run_id, verify)
    shell, child = pids_in(pids, merging)
    assert list((tmp_path / "runs" / ".scratch").glob("verify-*/worktree"))
    merging.send_signal(signal.SIGTERM)
    _, err = merging.communicate(timeout=120)
    assert merging.returncode == 130, err
    assert err == (
        f"autopilot: error: merge --verify stopped: $ {verify} was ended; nothing was "
        f"changed and autopilot/{run_id} is kept\n"
    )
    assert gone(shell) and gone(child)
    assert list((tmp_path / "runs" / ".scratch").iterdir()) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 2
    assert (files_of(repo), git(repo, "rev-parse", "HEAD")) == before


def test_a_killed_merge_leaves_a_tree_that_doctor_reports_and_merge_or_prune_removes(
    tmp_path: Path,
) -> None:
    """SIGKILL to a merge whose --verify runs: the command dies with it; its temporary
    worktree is a doctor finding until the next prune (or merge) removes it."""
    repo = make_repo(tmp_path / "repo")
    run_id = diverged_run(tmp_path, repo)
    scratch = tmp_path / "runs" / ".scratch"
    for number, cleaner in enumerate((["prune", "--older-than", "30d"], ["merge", run_id])):
        pids = tmp_path / f"pids{number}"
        merging = start_merge(repo, run_id, f"echo $$ > {pids}; touch {pids}.done; exec sleep 300")
        (leader,) = pids_in(pids, merging)
        (place,) = scratch.glob("verify-*/worktree")
        merging.kill()
        merging.communicate(timeout=120)
        assert gone(leader)
        assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 3
        doctor = run_cli(["doctor"], cwd=repo)
        assert (
            f"fail  worktrees        worktree {place} is left over from a merge that was "
            "killed (the next autopilot merge or prune removes it)"
        ) in doctor.stdout
        cleaned = run_cli(cleaner, cwd=repo)
        assert cleaned.returncode == 0, cleaned.stderr
        assert f"removed the left-over merge worktree {place}\n" in cleaned.stdout
        assert list(scratch.iterdir()) == []
        assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 2
        assert "left over" not in run_cli(["doctor"], cwd=repo).stdout
    assert (repo / "wt.txt").read_text() == "wt\n"  # the second clean-up was a merge


@pytest.mark.parametrize("where", ["flag", "config"])
def test_merge_verify_is_bounded_by_the_check_timeout(tmp_path: Path, where: str) -> None:
    """A --verify command that hangs is ended at --check-timeout (or the project's
    ``check-timeout``), as a run's checks are; nothing is changed."""
    repo = make_repo(tmp_path / "repo")
    run_id, _ = worktree_run(tmp_path, repo)
    before = files_of(repo), user_git_state(repo)
    args = ["merge", run_id, "--verify", "sleep 120"]
    if where == "flag":
        args += ["--check-timeout", "1s"]
    else:
        (repo / ".autopilot").mkdir()
        (repo / ".autopilot" / "config.toml").write_text('check-timeout = "1s"\n')
        before = files_of(repo), user_git_state(repo)
    done = run_cli(args, cwd=repo, timeout=100)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(
        "autopilot: error: merge --verify failed: $ sleep 120: timed out after 1 s; nothing "
        f"was changed and autopilot/{run_id} is kept (output: "
    )
    assert (files_of(repo), user_git_state(repo)) == before


def test_merge_check_timeout_without_verify_is_a_usage_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id, _ = worktree_run(tmp_path, repo)
    done = run_cli(["merge", run_id, "--check-timeout", "1s"], cwd=repo)
    assert (done.returncode, done.stderr) == (
        2,
        "autopilot: error: --check-timeout bounds --verify commands; give --verify CMD too\n",
    )
    bad = run_cli(["merge", run_id, "--verify", "true", "--check-timeout", "soon"], cwd=repo)
    assert bad.returncode == 2 and bad.stderr.startswith("autopilot: error: --check-timeout")
