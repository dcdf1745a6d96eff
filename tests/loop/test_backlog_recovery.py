"""A backlog attempt cut short by a crash, concluded on relaunch with its work item:
in-process (fake runner, workspace and clock; real tasks.jsonl, reports and checks).
The same with real processes and ``kill -9``: ``tests/runtime/test_backlog_crashes.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autopilot.loop.backlog_recovery import WORK_ITEM_FILE, read_started, started_in_log
from tests.conftest import read_jsonl
from tests.fakes import Rig, Scripted, SimulatedCrash
from tests.loop.test_driver_backlog import ITEMS, agent, arm_backlog


def _events(rig: Rig) -> list[dict[str, Any]]:
    return read_jsonl(rig.folder / "events.jsonl")


def _items(rig: Rig) -> dict[str, dict[str, Any]]:
    path = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"
    return {d["id"]: d for d in map(json.loads, path.read_text().splitlines())}


def _write_alpha(item: str, attempt: int, cwd: Path) -> Any:
    (cwd / f"{item}.txt").write_text("fixed\n")
    return "continue_next", {"ac1": True} if item != "gamma" else {}, (f"wrote {item}.txt",)


def _crash_in_first_attempt(rig: Rig, decide: Any, final: str = "COMPLETE") -> None:
    working = agent(rig, decide, final=final)
    crashing = Scripted(working.lines, crash=True, on_start=working.on_start)
    driver, _ = rig.driver([crashing])
    with pytest.raises(SimulatedCrash):
        driver.run()


def test_the_relaunch_concludes_the_item_with_autopilots_checks(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[0]], max_iterations=3)
    _crash_in_first_attempt(rig, _write_alpha)
    assert _items(rig)["alpha"]["status"] == "running"
    relaunched, runner = rig.driver([agent(rig, _write_alpha)])
    result = relaunched.run()
    assert (result.terminal_type, result.reason) == ("complete", "backlog_done")
    assert runner.requests == []  # concluded from what the crashed attempt left
    alpha = _items(rig)["alpha"]
    assert (alpha["status"], alpha["completion"]["verdict"]) == ("completed", "pass")
    assert (rig.folder / "iter-0001" / "check-ac1.log").exists()


def test_a_check_that_fails_after_the_crash_reopens_the_item(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[0]], max_iterations=3)

    def claim_only(item: str, attempt: int, cwd: Path) -> Any:
        return "continue_next", {"ac1": True}, ("trust me",)  # alpha.txt never written

    _crash_in_first_attempt(rig, claim_only)
    relaunched, runner = rig.driver([agent(rig, _write_alpha)])
    result = relaunched.run()
    assert result.reason == "backlog_done"
    ends = [(e["iteration"], e["status"]) for e in _events(rig) if e["type"] == "workitem_end"]
    assert ends == [(1, "reopened"), (2, "completed")]
    assert "check ac1 ($ test -f alpha.txt) exit 1" in runner.requests[0].attempt.prompt.read_text()


def test_files_changed_outside_the_surface_before_the_crash_reopen_the_item(
    tmp_path: Path,
) -> None:
    fenced = {**ITEMS[0], "allowed_surface": ["alpha.txt", "file.txt"]}
    rig = arm_backlog(tmp_path, [fenced], max_iterations=3)

    def stray(item: str, attempt: int, cwd: Path) -> Any:
        rig.workspace.touched.add("secrets.env")
        return _write_alpha(item, attempt, cwd)

    def undo(item: str, attempt: int, cwd: Path) -> Any:
        rig.workspace.touched.discard("secrets.env")  # left there, it reopens it again
        return _write_alpha(item, attempt, cwd)

    _crash_in_first_attempt(rig, stray)
    relaunched, _ = rig.driver([agent(rig, undo)])
    assert relaunched.run().reason == "backlog_done"
    violations = [e for e in _events(rig) if e["type"] == "surface_violation"]
    assert [(v["iteration"], v["paths"]) for v in violations] == [(1, ["secrets.env"])]


def test_an_undo_the_crash_cut_short_is_checked_against_the_items_start(
    tmp_path: Path,
) -> None:
    """The first attempt changes a file outside the surface and is reopened; the second
    undoes it and the driver dies: the relaunch compares the work tree with the item's
    start, kept in the run's folder, so the undo is no violation and the item completes."""
    fenced = {**ITEMS[0], "allowed_surface": ["alpha.txt", "file.txt"]}
    rig = arm_backlog(tmp_path, [fenced], max_iterations=4)

    def stray(item: str, attempt: int, cwd: Path) -> Any:
        rig.workspace.touched = {"secrets.env"}
        return _write_alpha(item, attempt, cwd)

    def undo(item: str, attempt: int, cwd: Path) -> Any:
        rig.workspace.touched = set()
        return _write_alpha(item, attempt, cwd)

    straying = agent(rig, stray)
    undoing = agent(rig, undo)
    crashing = Scripted(undoing.lines, crash=True, on_start=undoing.on_start)
    driver, _ = rig.driver([straying, crashing])
    with pytest.raises(SimulatedCrash):
        driver.run()
    assert (rig.folder / "item-marks" / "alpha.json").exists()
    relaunched, runner = rig.driver([agent(rig, _write_alpha)])
    assert relaunched.run().reason == "backlog_done"
    assert runner.requests == []
    ends = [(e["iteration"], e["status"]) for e in _events(rig) if e["type"] == "workitem_end"]
    assert ends == [(1, "reopened"), (2, "completed")]
    violations = [e for e in _events(rig) if e["type"] == "surface_violation"]
    assert [(v["iteration"], v["paths"]) for v in violations] == [(1, ["secrets.env"])]
    assert not (rig.folder / "item-marks" / "alpha.json").exists()  # done: dropped


def test_an_item_concluded_before_the_crash_is_not_concluded_twice(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[0], ITEMS[2]], max_iterations=4)
    working = agent(rig, _write_alpha)
    driver, _ = rig.driver([working])
    # The crash comes after alpha's workitem_end, before the step is logged.
    emit = driver.parts.record.emit

    def emit_then_crash(event_type: Any, **fields: Any) -> Any:
        written = emit(event_type, **fields)
        if str(event_type) == "backlog_snapshot" and fields.get("closedByLoop") == 1:
            raise SimulatedCrash()
        return written

    driver.parts.record.emit = emit_then_crash  # type: ignore[method-assign]
    with pytest.raises(SimulatedCrash):
        driver.run()
    relaunched, runner = rig.driver([agent(rig, _write_alpha)])
    assert relaunched.run().reason == "backlog_done"
    ends = [(e["itemId"], e["iteration"]) for e in _events(rig) if e["type"] == "workitem_end"]
    assert ends == [("alpha", 1), ("gamma", 2)]
    assert len(runner.requests) == 1


def test_a_false_promise_from_an_attempt_with_no_item_on_record_never_completes(
    tmp_path: Path,
) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[0]], max_iterations=2)
    _crash_in_first_attempt(rig, lambda *_: None, final="All done. COMPLETE")
    (rig.folder / "iter-0001" / WORK_ITEM_FILE).unlink()
    events = rig.folder / "events.jsonl"
    kept = [line for line in events.read_text().splitlines() if '"workitem_start"' not in line]
    events.write_text("\n".join(kept) + "\n")
    relaunched, _ = rig.driver([agent(rig, lambda *_: None, final="COMPLETE")])
    result = relaunched.run()
    assert (result.terminal_type, result.reason) == ("abort", "max_iterations")
    notes = [str(e.get("note")) for e in _events(rig) if e["type"] == "warning"]
    assert any("is not on record" in n for n in notes)
    assert any("no work item was concluded" in n for n in notes)


def test_the_started_item_is_read_from_its_record_or_the_log(tmp_path: Path) -> None:
    (tmp_path / WORK_ITEM_FILE).write_text('{"itemId": "a", "iteration": 3, "mark": 7}')
    started = read_started(tmp_path)
    assert started is not None and (started.item_id, started.iteration, started.mark) == (
        "a",
        3,
        None,
    )
    (tmp_path / WORK_ITEM_FILE).write_text('{"itemId": "a", "itera')  # torn
    assert read_started(tmp_path) is None
    log = [
        {"type": "workitem_start", "itemId": "a", "iteration": 2},
        {"type": "workitem_start", "itemId": "b", "iteration": 3},
    ]
    found = started_in_log(log, 3)
    assert found is not None and found.item_id == "b"
    assert started_in_log(log, 4) is None


def test_an_item_end_the_agent_appends_before_a_crash_is_concluded_again(
    tmp_path: Path,
) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[0]], max_iterations=3)
    run_id = rig.run_id

    def forge_end(item: str, attempt: int, cwd: Path) -> Any:
        # alpha.txt is never written: the check (test -f alpha.txt) fails.
        forged = [
            {"type": "workitem_end", "itemId": item, "iteration": 1, "status": "completed"},
            {
                "type": "workitem_recorded",
                "itemId": item,
                "iteration": 1,
                "item": {**ITEMS[0], "status": "completed"},
            },
        ]
        with (rig.folder / "events.jsonl").open("a") as log:
            for event in forged:
                log.write(json.dumps({**event, "ts": 1, "runId": run_id}) + "\n")
        return "continue_next", {"ac1": True}, ("trust me",)

    _crash_in_first_attempt(rig, forge_end)
    relaunched, runner = rig.driver([agent(rig, _write_alpha)])
    assert relaunched.run().reason == "backlog_done"
    ends = [(e["iteration"], e["status"]) for e in _events(rig) if e["type"] == "workitem_end"]
    assert ends == [(1, "completed"), (1, "reopened"), (2, "completed")]  # forged, then ours
    assert len(runner.requests) == 1  # alpha was run again after its check failed
    notes = [e["note"] for e in _events(rig) if e["type"] == "warning"]
    assert any("the logged end of work item alpha is not the driver's" in n for n in notes)


def test_an_item_whose_iterations_keep_being_cut_short_is_blocked_at_the_attempt_limit(
    tmp_path: Path,
) -> None:
    """An agent that ends its driver in every iteration (no decision): a crash is not a
    missing decision, but it is not free either: after ``max_item_attempts`` such
    iterations in a row the item is blocked and the run goes on with the next one."""
    rig = arm_backlog(tmp_path, [ITEMS[2], ITEMS[0]], max_iterations=3, max_item_attempts=2)

    def silent(item: str, attempt: int, cwd: Path) -> Any:
        return None  # no report: the driver dies before the agent could make one

    _crash_in_first_attempt(rig, silent)
    again = agent(rig, silent)
    driver, _ = rig.driver([Scripted(again.lines, crash=True, on_start=again.on_start)])
    with pytest.raises(SimulatedCrash):
        driver.run()
    assert _items(rig)["gamma"]["status"] == "running"  # one cut short: resumed
    relaunched, runner = rig.driver([agent(rig, _write_alpha)])
    assert relaunched.run().reason == "max_iterations"
    gamma = _items(rig)["gamma"]
    assert (gamma["status"], gamma["attempt"]) == ("blocked", 1)
    assert gamma["blocked_reason"] == (
        "2 iterations in a row were cut short by a crash of autopilot's process before a "
        "decision about gamma (the limit is 2); autopilot tasks unblock gamma gives it 2 more"
    )
    assert [r.attempt.prompt.read_text().count("work-item: alpha") for r in runner.requests] == [1]
    assert _items(rig)["alpha"]["status"] == "completed"
