"""Lanes of a parallel run claim items from one ``tasks.jsonl`` under its lock: several
processes racing for the same items never take one twice (real processes, real file)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from autopilot.core.workitems import (
    Completion,
    CompletionState,
    Criterion,
    ItemStatus,
    Verdict,
    WorkItem,
)
from autopilot.loop.backlog import BacklogShell
from autopilot.loop.backlog_verify import verify_completed
from autopilot.loop.claims import Landed
from autopilot.store.backlog import Backlog, BacklogFile
from autopilot.store.lane_ledger import LaneLedger

WORKER = r"""
import json, sys, time
from pathlib import Path
from autopilot.core.workitems import ItemStatus
from autopilot.loop.backlog import BacklogShell
from autopilot.loop.claims import Landed
from autopilot.store.backlog import Backlog

project, locks, lane, go, out = sys.argv[1:6]

class Siblings:
    def holds(self, run_id): return True
    def land(self, item): return Landed("0" * 40, (), "autopilot/run")

backlog = Backlog(Path(project), Path(locks))
shell = BacklogShell(backlog, lane, Path(out).parent, lambda *a, **k: None, lanes=Siblings())
Path(out + ".ready").touch()
while not Path(go).exists():
    time.sleep(0.001)
taken = []
for iteration in range(1, 1000):
    begun = shell.begin(iteration)
    if begun.done:
        break
    if begun.item is None:
        time.sleep(0.002)  # only items other lanes hold are left
        continue
    taken.append(begun.item.id)
    time.sleep(0.01)  # the agent works on it
    done = begun.item.with_status(ItemStatus.COMPLETED)
    backlog.update(lambda found: found.replace_item(done))
    shell.running = None
Path(out).write_text(json.dumps(taken))
"""

ITEMS = 24
LANES = 4


def test_lanes_racing_for_items_never_take_one_twice(tmp_path: Path) -> None:
    project = tmp_path / "project"
    locks = tmp_path / "locks"
    backlog = Backlog(project, locks)
    items = [WorkItem(id=f"item-{n:02d}", prompt=f"do {n}") for n in range(ITEMS)]
    backlog.update(lambda found: BacklogFile(tuple(items), exists=True))
    go = tmp_path / "go"
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                str(project),
                str(locks),
                f"lane-{k}",
                str(go),
                str(tmp_path / f"lane-{k}.json"),
            ]
        )
        for k in range(LANES)
    ]
    while not all((tmp_path / f"lane-{k}.json.ready").exists() for k in range(LANES)):
        assert all(worker.poll() is None for worker in workers)
        time.sleep(0.01)
    go.touch()
    assert [worker.wait(timeout=120) for worker in workers] == [0] * LANES

    taken = {k: json.loads((tmp_path / f"lane-{k}.json").read_text()) for k in range(LANES)}
    everything = [item for ids in taken.values() for item in ids]
    assert sorted(everything) == [item.id for item in items]  # each once, none missed
    assert sum(1 for ids in taken.values() if ids) >= 2  # the lanes really raced
    final = backlog.read().items
    assert {item.status for item in final} == {ItemStatus.COMPLETED}
    claimed = {item.id: item.extra["claimed_by"] for item in final}
    assert claimed == {item: f"lane-{k}" for k, ids in taken.items() for item in ids}


class _Siblings:
    def __init__(self, holding: set[str]) -> None:
        self.holding = holding

    def holds(self, run_id: str) -> bool:
        return run_id in self.holding

    def land(self, item: WorkItem) -> Landed:
        return Landed("0" * 40, (), "autopilot/run")


def test_an_item_claimed_by_a_lane_that_ended_is_taken_over(tmp_path: Path) -> None:
    backlog = Backlog(tmp_path / "project", tmp_path / "locks")
    running = WorkItem(id="a", status=ItemStatus.RUNNING, attempt=1)
    items = (
        running.with_status(ItemStatus.RUNNING, extra={"claimed_by": "lane-1"}),
        WorkItem(id="b", depends_on=("a",)),
    )
    backlog.update(lambda found: BacklogFile(items, exists=True))
    events: list[str] = []

    def shell(holding: set[str]) -> BacklogShell:
        return BacklogShell(
            backlog,
            "lane-2",
            tmp_path,
            lambda *event, **fields: events.append(str(event[0])),
            lanes=_Siblings(holding),
        )

    waiting = shell({"lane-1"}).begin(1)
    assert waiting.item is None
    assert waiting.wait == "waiting for work items other lanes are running: a"
    taken = shell(set()).begin(1)  # lane-1 has ended without finishing a
    assert taken.item is not None and taken.item.id == "a"
    assert backlog.read().items[0].extra == {"claimed_by": "lane-2"}


def test_what_a_lanes_agent_changed_of_other_items_is_undone_and_siblings_writes_stand(
    tmp_path: Path,
) -> None:
    """Lane 1's agent completes c and reopens the b lane 2 claimed meanwhile; lane 2's
    claim stands, c is as lane 1 found it, and the file says so."""
    backlog = Backlog(tmp_path / "project", tmp_path / "locks")
    criterion = Criterion(id="ac1", text="t", check="true")
    items = tuple(WorkItem(id=i, acceptance_criteria=(criterion,)) for i in ("a", "b", "c"))
    backlog.update(lambda found: BacklogFile(items, exists=True))
    ledger = LaneLedger(tmp_path / "lane-items.json")
    notes: list[str] = []

    def lane(run_id: str) -> BacklogShell:
        def emit(event_type: str, **fields: object) -> None:
            if event_type == "warning" and run_id == "lane-1":
                notes.append(str(fields["note"]))

        shell = BacklogShell(
            backlog, run_id, tmp_path / run_id, emit, lanes=_Siblings({"lane-1", "lane-2"})
        )
        shell.ledger = ledger
        (tmp_path / run_id).mkdir()
        return shell

    one, two = lane("lane-1"), lane("lane-2")
    mine = one.begin(1).item
    assert mine is not None and mine.id == "a"
    claimed = two.begin(1).item
    assert claimed is not None and claimed.id == "b"

    def forge(found: BacklogFile) -> BacklogFile:
        return found.with_items(
            [
                found.items[1].with_status(ItemStatus.READY),
                found.items[2].with_status(ItemStatus.COMPLETED),
            ]
        )

    backlog.update(forge)
    one.end(1, tmp_path / "lane-1" / "iter-1", [], tmp_path)
    after = {item.id: item for item in backlog.read().items}
    assert after["b"] == claimed  # the sibling's claim stands
    assert after["c"] == items[2]  # the forged completion is undone
    assert notes[0].startswith("work items b, c were changed while the agent worked; undone")


def test_a_lane_that_finds_no_item_open_checks_the_completed_ones_in_the_merged_tree(
    tmp_path: Path,
) -> None:
    """Never ``backlog_done`` on the records alone: a completion whose check fails in
    the parallel run's worktree is reopened, and the lane goes on with it."""
    backlog = Backlog(tmp_path / "project", tmp_path / "locks")
    done = WorkItem(
        id="a",
        acceptance_criteria=(Criterion(id="ac1", text="t", check="test -f a.txt"),),
    ).with_status(ItemStatus.COMPLETED, completion=Completion(CompletionState.PASSED, Verdict.PASS))
    backlog.update(lambda found: BacklogFile((done,), exists=True))
    merged = tmp_path / "merged"
    merged.mkdir()
    (tmp_path / "lane").mkdir()
    (tmp_path / "lane" / "a.txt").write_text("only in the lane's own worktree")
    shell = BacklogShell(
        backlog, "lane-1", tmp_path / "lane", lambda *a, **k: None, lanes=_Siblings(set())
    )
    shell.merged_tree = merged
    shell.ledger = LaneLedger(tmp_path / "lane-items.json")
    assert shell.begin(1).done

    verified = verify_completed(shell, 1, tmp_path / "lane" / "verified", tmp_path / "lane")
    assert not verified.passed and [i.id for i in verified.reopened] == ["a"]
    assert backlog.read().items[0].status is ItemStatus.REOPENED
    assert shell.ledger.read()[1]["a"][1].status is ItemStatus.REOPENED
    (merged / "a.txt").write_text("a")
    assert shell.begin(2).item is not None  # the lane works on it again
