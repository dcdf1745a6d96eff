"""An iteration of a plain run starts from the end mark of the one before when the
driver neither waited nor wrote into the work tree in between and the gap is short
(``loop.tree_marks``); otherwise it takes a fresh mark."""

from __future__ import annotations

from pathlib import Path

from autopilot.config import RunConfig
from autopilot.loop.tree_marks import REUSE_WINDOW_S, IterationMarks
from autopilot.store.memory import ensure_memory
from autopilot.store.project_files import memory_path
from autopilot.workspace.git import TreeMark
from tests.fakes import FakeClock, FakeWorkspace, Scripted, arm, claude_lines
from tests.loop.test_driver import _of, working


class CountingWorkspace(FakeWorkspace):
    """A fake work tree that counts its marks (each one a ``git status`` for real)."""

    def __init__(self, *, repository: bool = True) -> None:
        super().__init__(repository=repository)
        self.marks = 0

    def mark(self) -> TreeMark:
        self.marks += 1
        return super().mark()


def _marks(
    quiet: list[int] | None = None, *, reuse: bool = True
) -> tuple[IterationMarks, CountingWorkspace, FakeClock, list[int]]:
    workspace, clock, held = CountingWorkspace(), FakeClock(), quiet or [0]
    return IterationMarks(workspace, clock, lambda: held[0], reuse=reuse), workspace, clock, held


def test_a_start_right_after_an_end_reuses_its_mark() -> None:
    marks, workspace, _, _ = _marks()
    first = marks.start()
    end = marks.end()
    assert marks.start() is end and first is not end
    assert workspace.marks == 2
    # An end mark opens one iteration only.
    assert marks.start() is not end and workspace.marks == 3


def test_an_edit_in_the_gap_counts_toward_the_next_iteration() -> None:
    marks, workspace, _, _ = _marks()
    end = marks.end()
    workspace.edit()  # a person's edit between two iterations
    start = marks.start()
    assert start is end and start.entries != workspace.mark().entries


def test_a_wait_a_tree_write_or_a_long_gap_takes_a_fresh_mark() -> None:
    marks, workspace, clock, held = _marks()
    marks.end()
    held[0] += 1  # the driver waited, or put a file back
    assert marks.start() is not None and workspace.marks == 2
    marks.end()
    clock.advance(REUSE_WINDOW_S + 0.5)
    marks.start()
    assert workspace.marks == 4
    marks.end()
    marks.forget()  # a verify command ran in the tree
    marks.start()
    assert workspace.marks == 6
    marks.end()
    clock.advance(REUSE_WINDOW_S / 2)
    marks.start()
    assert workspace.marks == 7


def test_a_backlog_run_or_a_lane_always_marks_afresh() -> None:
    marks, workspace, _, _ = _marks(reuse=False)
    marks.end()
    marks.start()
    assert workspace.marks == 2


def test_a_mark_git_could_not_take_is_not_reused() -> None:
    workspace, clock = CountingWorkspace(repository=False), FakeClock()
    marks = IterationMarks(workspace, clock, lambda: 0, reuse=True)
    marks.end()
    marks.start()
    assert workspace.marks == 2


def test_a_plain_run_marks_once_per_iteration(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=4))
    ensure_memory(tmp_path / "work")  # a project autopilot has run in before
    rig.workspace = workspace = CountingWorkspace()
    driver, _ = rig.driver([working(rig)])
    assert driver.run().reason == "max_iterations"
    # The opening mark (the baseline's, then the first iteration's start), then each end.
    assert workspace.marks == 1 + 4
    # Each iteration's edit is its own progress, and checkpoints still follow the tree.
    ends = _of(rig, "iteration_end")
    assert [e["filesChanged"] for e in ends] == [1, 1, 1, 1]
    assert len(_of(rig, "checkpoint")) >= 4


def test_a_memory_file_made_at_the_start_is_not_the_first_iterations_change(
    tmp_path: Path,
) -> None:
    """In a new project the memory file is made after the opening mark: the first
    iteration starts from a fresh mark, so the file is not counted as its work."""
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    rig.workspace = workspace = CountingWorkspace()
    driver, _ = rig.driver([working(rig)])
    assert driver.run().reason == "max_iterations"
    assert memory_path(tmp_path / "work").exists()
    assert workspace.marks == 1 + 1 + 2
    assert [e["filesChanged"] for e in _of(rig, "iteration_end")] == [1, 1]


def test_idle_iterations_still_stagnate(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=10, stagnation_limit=3))
    ensure_memory(tmp_path / "work")
    rig.workspace = workspace = CountingWorkspace()
    driver, _ = rig.driver([Scripted(claude_lines("nothing to do"))])
    result = driver.run()
    assert result.reason == "stagnation"
    assert workspace.marks == 1 + 3


def test_the_memory_file_put_back_takes_a_fresh_mark(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    rig.workspace = workspace = CountingWorkspace()
    cwd = tmp_path / "work"
    ensure_memory(cwd)

    def delete_memory(_: object) -> None:
        memory_path(cwd).unlink(missing_ok=True)

    driver, _ = rig.driver(
        [Scripted(claude_lines("cleaned"), on_start=delete_memory), working(rig)]
    )
    assert driver.run().reason == "max_iterations"
    assert _of(rig, "memory_restored")
    # The opening mark starts the first iteration; the second starts from a fresh mark.
    assert workspace.marks == 4
