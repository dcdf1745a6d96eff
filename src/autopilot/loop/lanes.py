"""A lane of a parallel backlog run, as its driver sees it.

``autopilot run --backlog --parallel N`` arms one parallel run (its run branch
``autopilot/<runId>`` in its own worktree, where merges happen) and N lane runs, each
an ordinary worktree backlog run on its own branch started from the run branch, with
``state.json`` ``lane`` = ``{"parent", "number"}``; the parent's ``parallel`` names
its lanes. Each lane is driven by its own driver (its own process): it claims items
from the one ``tasks.jsonl`` (``loop.backlog``), lands completed items in the run
branch (``workspace.landing``), and checks the budgets against every lane's spend
together (``core.spend.shared``). The iteration budget is shared exactly: a lane that
starts an iteration reserves it in the parallel run's ``lane-steps.json`` under its
``lane-steps.lock`` after checking every lane's iterations, the ones other live lanes
have reserved included, so two lanes at their boundaries at once never overshoot it.
"""

from __future__ import annotations

import json
from pathlib import Path

from autopilot.core.spend import shared
from autopilot.core.state import Spend
from autopilot.core.structs import replace
from autopilot.core.workitems import WorkItem
from autopilot.errors import AutopilotError
from autopilot.loop.claims import Landed
from autopilot.store.atomic import write_json_atomically
from autopilot.store.files import read_bounded_file
from autopilot.store.flock import holding
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

STEPS_FILE = "lane-steps.json"
"""In the parallel run's folder: lane run id -> the iterations it may have started
(``{"<laneRunId>": 3}``), written under ``STEPS_LOCK``."""

STEPS_LOCK = "lane-steps.lock"
STEPS_LOCK_TIMEOUT_SECONDS = 30.0


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

    def others_spend(self, reserved: dict[str, int] | None = None) -> list[Spend]:
        """What the other lanes of the parallel run have spent; a lane not ended counts
        at least the iterations it ``reserved`` (lane run id -> iterations)."""
        parent = self._state(self.lane.parent)
        if parent is None:
            return []
        spends = []
        for lane in lane_runs(parent):
            state = self._state(lane) if lane != self.run_id else None
            if state is None:
                continue
            spend = state.spend
            if reserved and not state.terminated:
                spend = replace(spend, iterations=max(spend.iterations, reserved.get(lane, 0)))
            spends.append(spend)
        return spends

    def shared_spend(self, own: Spend, *, starting: bool, max_iterations: int | None) -> Spend:
        """Every lane's spend together, for the budget check at this lane's boundary.

        Under the parallel run's steps lock, each other lane not ended counts at least
        the iterations it reserved (one may be in flight). When ``starting`` (no
        iteration of this lane is open) and the total leaves room under
        ``max_iterations``, this lane reserves its next iteration before the lock is
        released; a reservation it holds already (a boundary passed again) is kept.

        Args:
            own: This lane's spend.
            starting: This lane is about to start an iteration (not resume one).
            max_iterations: The iteration budget (None: none).

        Raises:
            StateFileError: the steps lock stayed taken.
        """
        folder = run_dir(self.root, self.lane.parent)
        if not folder.is_dir():  # the parallel run's folder was removed under it
            return shared(own, self.others_spend())
        steps = folder / STEPS_FILE
        with holding(folder / STEPS_LOCK, timeout_seconds=STEPS_LOCK_TIMEOUT_SECONDS, what=steps):
            reserved = _read_steps(steps)
            others = self.others_spend(reserved)
            total = shared(own, others)
            held = reserved.get(self.run_id, 0) > own.iterations
            room = max_iterations is None or total.iterations < max_iterations
            if starting and room and not held:
                reserved[self.run_id] = own.iterations + 1
                write_json_atomically(steps, reserved)
        return total

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


def _read_steps(path: Path) -> dict[str, int]:
    """``lane-steps.json`` (empty when missing or not what autopilot writes)."""
    try:
        data = json.loads(read_bounded_file(path, max_bytes=64 * 1024).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        key: value
        for key, value in data.items()
        if isinstance(key, str) and isinstance(value, int) and not isinstance(value, bool)
    }
