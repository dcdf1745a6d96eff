"""The lanes of a parallel backlog run, as ``state.json`` records them.

A parallel run's ``state.json`` has ``parallel`` = ``{"lanes": [laneRunId, …]}``; each
lane's has ``lane`` = ``{"parent": runId, "number": n}`` (``loop.lanes``). Read here
without loading the driver, for ``status``, ``pause``, ``resume`` and ``stop``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autopilot.store.paths import is_valid_run_id, run_dir
from autopilot.store.project_files import checkout_folder
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state_quietly


@dataclass(frozen=True)
class LaneOf:
    """A lane's place in its parallel run (``state.json`` ``lane``).

    Attributes:
        parent: The parallel run's id.
        number: The lane's number, from 1.
    """

    parent: str
    number: int

    def to_json(self) -> dict[str, Any]:
        """For ``state.json``."""
        return {"parent": self.parent, "number": self.number}

    @classmethod
    def from_json(cls, data: object) -> LaneOf | None:
        """From ``to_json`` output; None when absent or malformed."""
        if not isinstance(data, Mapping):
            return None
        parent, number = data.get("parent"), data.get("number")
        if not isinstance(parent, str) or not parent or not isinstance(number, int):
            return None
        return cls(parent, number)


def lane_runs(state: RunState) -> list[str]:
    """The lane run ids of a parallel run (``state.json`` ``parallel.lanes``)."""
    parallel = state.extra.get("parallel")
    lanes = parallel.get("lanes") if isinstance(parallel, Mapping) else None
    if not isinstance(lanes, list):
        return []
    return [lane for lane in lanes if isinstance(lane, str) and is_valid_run_id(lane)]


@dataclass(frozen=True)
class LaneView:
    """What ``status`` and the parallel run's log show of a lane.

    Attributes:
        number: The lane's number.
        run_id: Its run id.
        status: Its status (``running``, ``paused``, ``completed``, …).
        iteration: Its iteration.
        item: The work item it is on, or None.
        agent: Its agent.
        ended: Its terminal reason, once it has ended.
    """

    number: int
    run_id: str
    status: str
    iteration: int
    item: str | None
    agent: str | None
    ended: str | None

    def line(self) -> str:
        """``lane 1  <runId>  running, iteration 2, item a (claude)``."""
        what = (self.ended and f"ended ({self.ended})") or self.status
        item = f", item {self.item}" if self.item and not self.ended else ""
        agent = f" ({self.agent})" if self.agent else ""
        where = f"{what}, iteration {self.iteration}{item}{agent}"
        return f"lane {self.number}     {self.run_id}  {where}"


def lane_views(root: Path, parent: RunState) -> list[LaneView]:
    """Each lane of a parallel run as it is now (lanes whose state cannot be read are
    left out); a lane's item is the running item of ``tasks.jsonl`` it claimed."""
    if not lane_runs(parent):
        return []
    from autopilot.errors import BacklogError
    from autopilot.store.backlog import Backlog  # only for a parallel run's status

    try:
        items = Backlog(_home(parent), root / ".locks").read().items
    except BacklogError:
        items = []
    claims = {
        item.extra.get("claimed_by"): item.id for item in items if item.status.value == "running"
    }
    views = []
    for lane_id in lane_runs(parent):
        state = read_state_quietly(RunDir(run_dir(root, lane_id)).state)
        lane = LaneOf.from_json(state.extra.get("lane")) if state else None
        if state is None or lane is None:
            continue
        views.append(
            LaneView(
                lane.number,
                lane_id,
                state.status.value,
                state.iteration,
                None if state.terminated else claims.get(lane_id),
                state.agent,
                state.termination_reason if state.terminated else None,
            )
        )
    return views


def _home(parent: RunState) -> Path:
    """The folder of the user's checkout whose backlog a parallel run works."""
    cwd = Path(parent.cwd or ".")
    record = parent.extra.get("worktree")
    path = record.get("path") if isinstance(record, Mapping) else None
    origin = record.get("origin") if isinstance(record, Mapping) else None
    if not isinstance(path, str) or not isinstance(origin, str):
        return cwd
    return checkout_folder(cwd, Path(path), Path(origin))
