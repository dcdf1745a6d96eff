"""The OFF switches that hold a run: its work folder's, and a ``--worktree`` run's
user checkout's."""

from __future__ import annotations

from pathlib import Path

from autopilot.store.approved_run import APPROVED_RUN_FILE
from autopilot.store.backlog import TASKS_FILE
from autopilot.store.project_files import RECORD_NAMES, is_record, off_switch, run_projects
from autopilot.store.reports import APPLIED_DECISION_FILE, DECISION_FILE, REJECTED_DECISION_FILE


def test_a_worktree_runs_off_switches_are_its_folder_and_the_same_folder_of_the_checkout(
    tmp_path: Path,
) -> None:
    checkout, worktree = tmp_path / "checkout", tmp_path / "runs" / "worktrees" / "r-1"
    record = {"path": str(worktree), "origin": str(checkout), "branch": "autopilot/r-1"}
    assert run_projects(str(worktree / "pkg"), record) == (worktree / "pkg", checkout / "pkg")
    assert run_projects(str(worktree), record) == (worktree, checkout)
    assert run_projects(str(tmp_path / "elsewhere"), record) == (tmp_path / "elsewhere",)
    assert run_projects(str(checkout), None) == (checkout,)
    assert run_projects(str(checkout), {"path": 3, "origin": None}) == (checkout,)


def test_the_checkouts_off_file_holds_a_worktree_run(tmp_path: Path) -> None:
    checkout, worktree = tmp_path / "checkout", tmp_path / "wt"
    record = {"path": str(worktree), "origin": str(checkout)}
    assert off_switch(str(worktree), record) is None
    (checkout / ".autopilot").mkdir(parents=True)
    (checkout / ".autopilot" / "OFF").write_text("")
    assert off_switch(str(worktree), record) == checkout / ".autopilot" / "OFF"
    assert off_switch(str(worktree), None) is None


def test_the_records_are_the_files_autopilot_keeps_in_dot_autopilot() -> None:
    files = (TASKS_FILE, APPROVED_RUN_FILE, DECISION_FILE, APPLIED_DECISION_FILE)
    for path in (*files, REJECTED_DECISION_FILE):
        assert path.parent.name == ".autopilot" and path.name in RECORD_NAMES
        assert is_record(path.as_posix())
        assert is_record(f"deep/down/{path.as_posix()}")
    assert is_record(".autopilot/memory.md") and is_record(".autopilot/OFF")
    assert not is_record(".autopilot/config.toml")
    assert not is_record("memory.md") and not is_record("x.autopilot/memory.md")
    assert not is_record(".autopilot/sub/memory.md")
