"""A lane of a parallel run with no work item for it yet waits for work: its status
is ``waiting`` with what it waits for, in ``state.json``, ``status``/``list`` and the
live view's badge, never ``paused`` (nothing is paused, and no ``pause`` event)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autopilot.cli.control_body import status_text
from autopilot.core.vocabulary import RunStatus
from autopilot.core.workitems import WorkItem
from autopilot.loop.backlog import BacklogShell
from autopilot.loop.backlog_run import backlog_boundary
from autopilot.loop.claims import Landed
from autopilot.loop.record import RunRecord
from autopilot.loop.signals import Interrupts
from autopilot.loop.waits import Waits
from autopilot.store.backlog import Backlog
from autopilot.store.events import EventLog
from autopilot.store.run_state import RunState
from autopilot.store.snapshot import Snapshot
from autopilot.store.state import StateStore
from autopilot.view.badge import status_badge
from tests.conftest import read_jsonl
from tests.fakes import START_MS, FakeClock

LANE = "r-lane2-1796160786320"
OTHER = "r-lane1-1796160786310"


class Siblings:
    """Every other lane is alive and holds its claim."""

    def holds(self, run_id: str) -> bool:
        return True

    def land(self, item: WorkItem) -> Landed:
        return Landed("0" * 40, (), "autopilot/run")


def test_a_lane_with_no_item_for_it_waits_for_work_and_says_so(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    (project / ".autopilot").mkdir(parents=True)
    items: list[dict[str, Any]] = [
        {"id": "a", "prompt": "do a", "status": "running", "claimed_by": OTHER},
        {"id": "b", "prompt": "do b", "depends_on": ["a"]},
    ]
    tasks = project / ".autopilot" / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(item) + "\n" for item in items))
    folder = tmp_path / "runs" / LANE
    folder.mkdir(parents=True)
    clock = FakeClock()
    store = StateStore(folder / "state.json")
    store.create(RunState(run_id=LANE, mode="backlog", cwd=str(project)))
    record = RunRecord(store, EventLog(folder / "events.jsonl", LANE, clock.now_ms))
    shell = BacklogShell(
        Backlog(project, tmp_path / "runs" / ".locks"),
        LANE,
        folder,
        lambda event_type, **fields: None,
        lanes=Siblings(),
    )
    seen: list[RunState] = []

    def the_other_lane_is_done() -> bool:  # what the lane looks like while it waits
        seen.append(store.read())
        done = [{**items[0], "status": "completed"}, items[1]]
        tasks.write_text("".join(json.dumps(item) + "\n" for item in done))
        return True

    class Watching(Waits):
        def hold_until(
            self, why: str, ready: Callable[[], bool], *, status: RunStatus = RunStatus.PAUSED
        ) -> None:
            super().hold_until(why, lambda: the_other_lane_is_done() and ready(), status=status)

    waits = Watching(record, clock, Interrupts(), project)
    found = backlog_boundary(shell, record.refresh(), waits)
    record.log.close()

    assert found.again
    waiting = seen[0]
    why = "waiting for work items other lanes are running: a"
    assert (waiting.status, waiting.hold) == (RunStatus.WAITING, why)
    assert status_text(waiting, START_MS) == f"waiting — {why}"
    badge = status_badge(waiting.to_json(), Snapshot(), True, START_MS)
    assert (badge.label, badge.detail) == ("WAITING", why)
    after = store.read()
    assert (after.status, after.hold) == (RunStatus.RUNNING, None)
    log = folder / "events.jsonl"
    types = [event["type"] for event in read_jsonl(log)] if log.exists() else []
    assert "pause" not in types and "resume" not in types
