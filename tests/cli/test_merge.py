"""``autopilot merge`` of a --worktree run: what it says, and what it never does to the
user's checkout."""

from __future__ import annotations

from pathlib import Path

from autopilot.workspace.repo import open_repository
from autopilot.workspace.worktrees import create_worktree
from tests.conftest import run_cli
from tests.manage.runs import make_run
from tests.workspace.gitstate import git, make_repo


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
