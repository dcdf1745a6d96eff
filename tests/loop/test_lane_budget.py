"""The lanes of a parallel run share its budgets exactly: the approved run's steps
(``.autopilot/approved-run.json``) and the iteration budget are taken under a lock,
so two lanes at their boundaries at once never lose a step nor pass the budget."""

from __future__ import annotations

import json
from pathlib import Path

from autopilot.core.boundary import new_boundary
from autopilot.core.state import Spend
from autopilot.loop.approved import ApprovedRun
from autopilot.loop.lanes import RunLanes
from autopilot.store.approved_run import write_approved_run
from autopilot.store.lanes import LaneOf
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore

PARENT = "r-1796160786329"
LANES = ("r-lane1-1796160786310", "r-lane2-1796160786320")


def _lanes(tmp_path: Path, steps: int) -> tuple[Path, list[ApprovedRun], list[str]]:
    """Two lanes' views of one checkout's approved-run.json (one lock, one copy)."""
    home = tmp_path / "repo"
    boundary = new_boundary(run_id="r", scope="s", steps=steps, surfaces=("**",), source="t")
    write_approved_run(home / ".autopilot" / "approved-run.json", boundary.to_json())
    copy = tmp_path / "runs" / PARENT / "approved-run.json"
    copy.parent.mkdir(parents=True)
    warnings: list[str] = []
    lock = tmp_path / "runs" / ".locks" / "approved.lock"
    return (
        home / ".autopilot" / "approved-run.json",
        [ApprovedRun(home, copy, warnings.append, lock) for _ in LANES],
        warnings,
    )


def _steps(path: Path) -> int:
    return int(json.loads(path.read_text())["budget"]["remaining_steps"])


def test_two_lanes_taking_steps_at_once_lose_none(tmp_path: Path) -> None:
    path, (first, second), warnings = _lanes(tmp_path, steps=5)
    assert first.check().stop is None and second.check().stop is None  # both saw 5
    assert first.take().stop is None
    assert second.take().stop is None
    assert _steps(path) == 3
    first.end()  # the first lane's agent is done: the file is as the lanes left it
    assert _steps(path) == 3 and warnings == []


def test_the_last_step_goes_to_one_lane_only(tmp_path: Path) -> None:
    path, (first, second), _ = _lanes(tmp_path, steps=1)
    assert first.check().stop is None and second.check().stop is None  # both saw 1
    assert first.take().stop is None
    stop = second.take().stop
    assert stop is not None and stop[0] == "max_iterations"
    assert _steps(path) == 0


def test_a_step_taken_for_no_item_is_given_back(tmp_path: Path) -> None:
    path, (first, _), _ = _lanes(tmp_path, steps=1)
    first.check()
    assert first.take().stop is None and _steps(path) == 0
    first.give_back()
    assert _steps(path) == 1


def _write(root: Path, state: RunState) -> None:
    folder = root / state.run_id
    folder.mkdir(parents=True, exist_ok=True)
    StateStore(folder / "state.json").create(state)


def test_two_lanes_at_their_boundaries_at_once_never_pass_the_iteration_budget(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    parent = RunState(run_id=PARENT, mode="parallel")
    parent.extra = {"parallel": {"lanes": list(LANES)}}
    _write(root, parent)
    for number, run_id in enumerate(LANES, start=1):
        lane = RunState(run_id=run_id, mode="backlog", spend=Spend(iterations=1))
        lane.extra = {"lane": LaneOf(PARENT, number).to_json()}
        _write(root, lane)
    first, second = (
        RunLanes(root, run_id, LaneOf(PARENT, n), tmp_path) for n, run_id in enumerate(LANES, 1)
    )

    # 2 of 3 iterations spent: the first lane reserves the third, the second finds
    # none left although neither lane's spend has moved yet.
    own = Spend(iterations=1)
    assert first.shared_spend(own, starting=True, max_iterations=3).iterations == 2
    assert second.shared_spend(own, starting=True, max_iterations=3).iterations == 3
    # The first lane passing its boundary again keeps its reservation.
    assert first.shared_spend(own, starting=True, max_iterations=3).iterations == 2
    # A lane that resumes its open iteration reserves nothing more.
    assert second.shared_spend(own, starting=False, max_iterations=3).iterations == 3
    assert json.loads((root / PARENT / "lane-steps.json").read_text()) == {LANES[0]: 2}
