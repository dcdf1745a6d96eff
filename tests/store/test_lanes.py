"""What ``status`` shows of a parallel run's lanes, from their ``state.json`` and the
checkout's ``tasks.jsonl`` (the running item each lane claimed)."""

from __future__ import annotations

import json
from pathlib import Path

from autopilot.store.lanes import LaneOf, lane_runs, lane_views
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore


def _write(root: Path, state: RunState) -> None:
    folder = root / state.run_id
    folder.mkdir(parents=True)
    StateStore(folder / "state.json").create(state)


def test_each_lane_shows_its_claimed_item_status_and_agent(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    checkout = tmp_path / "repo"
    (checkout / ".autopilot").mkdir(parents=True)
    items = [
        {"id": "a", "status": "running", "claimed_by": "r-lane1-1796160786310"},
        {"id": "b", "status": "running", "claimed_by": "r-lane2-1796160786320"},
        {"id": "c", "status": "ready"},
    ]
    (checkout / ".autopilot" / "tasks.jsonl").write_text(
        "".join(json.dumps(item) + "\n" for item in items)
    )
    worktree = {
        "path": str(root / "worktrees" / "r-1796160786329"),
        "branch": "autopilot/r-1796160786329",
    }
    worktree |= {"base": "0" * 40, "origin": str(checkout)}
    parent = RunState(run_id="r-1796160786329", mode="parallel", cwd=worktree["path"])
    parent.extra = {
        "worktree": worktree,
        "parallel": {"lanes": ["r-lane1-1796160786310", "r-lane2-1796160786320"]},
    }
    _write(root, parent)
    for number in (1, 2):
        lane = RunState(
            run_id=f"r-lane{number}-17961607863{number}0",
            mode="backlog",
            agent="claude",
            iteration=3,
        )
        lane.extra = {"lane": LaneOf("r-1796160786329", number).to_json()}
        if number == 2:
            lane.terminated, lane.termination_reason = True, "user_stopped"
        _write(root, lane)

    assert lane_runs(parent) == ["r-lane1-1796160786310", "r-lane2-1796160786320"]
    tampered = RunState(run_id="r-1796160786329")
    tampered.extra = {"parallel": {"lanes": ["../etc", 3, "r-lane1-1796160786310"]}}
    assert lane_runs(tampered) == ["r-lane1-1796160786310"]
    lines = [view.line() for view in lane_views(root, parent)]
    assert lines == [
        "lane 1     r-lane1-1796160786310  running, iteration 3, item a (claude)",
        "lane 2     r-lane2-1796160786320  ended (user_stopped), iteration 3 (claude)",
    ]
    assert lane_views(root, RunState(run_id="plain")) == []
