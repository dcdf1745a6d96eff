"""A lane of a parallel backlog run, as its driver sees it.

``autopilot run --backlog --parallel N`` arms one parallel run (its run branch
``autopilot/<runId>`` in its own worktree, where merges happen) and N lane runs, each
an ordinary worktree backlog run on its own branch started from the run branch, with
``state.json`` ``lane`` = ``{"parent", "number"}``; the parent's ``parallel`` names
its lanes. Each lane is driven by its own driver (its own process): it claims items
from the one ``tasks.jsonl`` (``loop.backlog``), lands completed items in the run
branch (``workspace.landing``), and checks the budgets against every lane's spend
together (``core.spend.shared``).
"""

from __future__ import annotations

from pathlib import Path

from autopilot.core.state import Spend
from autopilot.core.workitems import WorkItem
from autopilot.errors import AutopilotError
from autopilot.loop.claims import Landed
from autopilot.store.lanes import LaneOf, lane_runs
from autopilot.store.paths import run_dir
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state_quietly
from autopilot.workspace.landing import land
from autopilot.workspace.repo import open_repository
from autopilot.workspace.worktrees import RunWorktree

MERGE_LOCK = "merge.lock"
"""The parallel run's merge lock, in its run folder: one landing at a time."""


class RunLanes:
    """One lane's view of its siblings and its run branch (``loop.backlog.Lanes``).

    Args:
        root: The runs root.
        run_id: This lane's run id.
        lane: Its place in the parallel run.
        cwd: Its work tree.
    """

    def __init__(self, root: Path, run_id: str, lane: LaneOf, cwd: Path) -> None:
        self.root, self.run_id, self.lane, self.cwd = root, run_id, lane, cwd

    def _state(self, run_id: str) -> RunState | None:
        return read_state_quietly(RunDir(run_dir(self.root, run_id)).state)

    def holds(self, run_id: str) -> bool:
        """True while run ``run_id`` has not ended (a crashed lane's supervisor brings
        it back to finish its item)."""
        state = self._state(run_id)
        return state is not None and not state.terminated

    def others_spend(self) -> list[Spend]:
        """What the other lanes of the parallel run have spent."""
        parent = self._state(self.lane.parent)
        if parent is None:
            return []
        spends = []
        for lane in lane_runs(parent):
            state = self._state(lane) if lane != self.run_id else None
            if state is not None:
                spends.append(state.spend)
        return spends

    def land(self, item: WorkItem) -> Landed:
        """Commit this lane's work for ``item`` and merge it into the run branch; a
        git failure counts as a conflict that names it (the item is done again)."""
        parent = self._state(self.lane.parent)
        place = RunWorktree.from_json(parent.extra.get("worktree")) if parent else None
        if place is None:
            return Landed(None, (f"run {self.lane.parent} has no run branch",), "")
        try:
            merged = land(
                open_repository(self.cwd),
                open_repository(place.path),
                run_dir(self.root, self.lane.parent) / MERGE_LOCK,
                lane_run_id=self.run_id,
                item_id=item.id,
                attempt=item.attempt,
            )
        except AutopilotError as error:
            return Landed(None, (f"not merged: {error}",), place.branch)
        return Landed(merged.sha, merged.conflicts, place.branch)


def run_lanes(root: Path, run_id: str, state: RunState) -> RunLanes | None:
    """The lanes view of a run armed as a lane of a parallel run, else None."""
    lane = LaneOf.from_json(state.extra.get("lane"))
    if lane is None or state.cwd is None:
        return None
    return RunLanes(root, run_id, lane, Path(state.cwd))
