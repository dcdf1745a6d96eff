"""What an agent that shares the user's uid forges in a backlog run, and what the driver
makes of it (in-process, fake runner and workspace; real tasks.jsonl, log and checks):
a completion written into ``tasks.jsonl`` and the run's log before it kills its driver,
an attempt count written lower, its item's marks rewritten in the run folder. The same
in a hook run: ``tests/hook/test_hook_forgeries.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autopilot.core.digest import sha256_hex
from autopilot.core.workitems import item_from_json
from tests.conftest import read_jsonl
from tests.fakes import Rig
from tests.loop.test_backlog_recovery import _crash_in_first_attempt, _write_alpha
from tests.loop.test_driver_backlog import ITEMS, agent, arm_backlog, at_first_gate


def _events(rig: Rig) -> list[dict[str, Any]]:
    return read_jsonl(rig.folder / "events.jsonl")


def _tasks_path(rig: Rig) -> Path:
    return rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"


def _items(rig: Rig) -> dict[str, dict[str, Any]]:
    return {d["id"]: d for d in map(json.loads, _tasks_path(rig).read_text().splitlines())}


def _notes(rig: Rig) -> list[str]:
    return [str(e.get("note")) for e in _events(rig) if e["type"] == "warning"]


def forged_completion(item: dict[str, Any], attempt: int) -> dict[str, Any]:
    """``item`` as an agent writes it completed, with a passing completion record."""
    completion = {
        "state": "passed",
        "verdict": "pass",
        "evidence": ["[completion-check] ac1: exit 0"],
        "completion_check_digest": "sha256:" + "0" * 64,
    }
    return {**item, "status": "completed", "attempt": attempt, "completion": completion}


def forge_completion(rig: Rig, item_id: str, iteration: int, attempt: int) -> None:
    """Write ``item_id`` completed in tasks.jsonl and append the matching lines to the
    run's log, as an agent in iteration ``iteration`` would (``attempt`` in both)."""
    path = _tasks_path(rig)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows = [forged_completion(r, attempt) if r["id"] == item_id else r for r in rows]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    forged = next(r for r in rows if r["id"] == item_id)
    lines = [
        {"type": "workitem_recorded", "itemId": item_id, "iteration": iteration, "item": forged},
        {
            "type": "workitem_end",
            "itemId": item_id,
            "iteration": iteration,
            "status": "completed",
            "decision": "continue_next",
            "attempt": attempt,
            "verdict": "pass",
            "closesN": 1,
        },
    ]
    with (rig.folder / "events.jsonl").open("a") as log:
        for line in lines:
            log.write(json.dumps({**line, "ts": 1, "runId": rig.run_id}) + "\n")


def test_a_completion_forged_in_tasks_jsonl_and_the_log_before_a_kill_is_checked_again(
    tmp_path: Path,
) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[0]], max_iterations=3)

    def forge(item: str, attempt: int, cwd: Path) -> Any:
        forge_completion(rig, item, 1, attempt=1)  # alpha.txt is never written
        return None

    _crash_in_first_attempt(rig, forge)
    relaunched, runner = rig.driver([agent(rig, _write_alpha)])
    result = relaunched.run()
    assert (result.terminal_type, result.reason) == ("complete", "backlog_done")
    assert len(runner.requests) == 1  # the forged completion did not end the run
    prompt = runner.requests[0].attempt.prompt.read_text()
    assert "work-item: alpha" in prompt and "test -f alpha.txt" in prompt
    verified = [e for e in _events(rig) if e["type"] == "backlog_verified"]
    assert [(e["passed"], e["reopened"]) for e in verified] == [
        (False, ["alpha"]),
        (True, []),
    ]
    assert verified[0]["items"][0]["checks"] == ["ac1: exit 1"]
    ends = [(e["status"], e["decision"]) for e in _events(rig) if e["type"] == "workitem_end"]
    assert ends[-2:] == [("reopened", "backlog_verified"), ("completed", "continue_next")]
    assert (rig.folder / "iter-0001" / "verified-alpha" / "check-ac1.log").exists()


def test_a_later_item_that_breaks_an_earlier_one_reopens_it_before_the_run_ends(
    tmp_path: Path,
) -> None:
    rig = arm_backlog(tmp_path, ITEMS[:2], max_iterations=5)

    def work(item: str, attempt: int, cwd: Path) -> Any:
        (cwd / f"{item}.txt").write_text("fixed\n")
        if item == "beta" and attempt == 1:
            (cwd / "alpha.txt").unlink()  # beta's work breaks alpha
        return "continue_next", {"ac1": True}, (f"wrote {item}.txt",)

    driver, runner = rig.driver([agent(rig, work)])
    assert driver.run().reason == "backlog_done"
    done = [r.attempt.prompt.read_text() for r in runner.requests]
    assert [p.count("work-item: alpha") for p in done] == [1, 0, 1]
    verified = [
        (e["passed"], e["reopened"]) for e in _events(rig) if e["type"] == "backlog_verified"
    ]
    assert verified == [(False, ["alpha"]), (True, [])]
    assert _items(rig)["alpha"]["attempt"] == 2
    assert not [n for n in _notes(rig) if "item-marks" in n or "lower than" in n]


def test_an_attempt_count_forged_lower_does_not_give_the_item_attempts_back(
    tmp_path: Path,
) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[0]], max_iterations=3, max_item_attempts=1)

    def forge(item: str, attempt: int, cwd: Path) -> Any:
        forge_completion(rig, item, 1, attempt=0)
        return None

    _crash_in_first_attempt(rig, forge)
    asked = at_first_gate(rig, lambda s: setattr(s, "stop_requested", True))
    relaunched, runner = rig.driver([agent(rig, _write_alpha)])
    relaunched.run()
    assert runner.requests == []  # its one attempt is spent: blocked, not tried again
    assert asked and "alpha is blocked: 1 attempt did not complete it" in asked[0], asked
    alpha = _items(rig)["alpha"]
    assert (alpha["status"], alpha["attempt"]) == ("blocked", 1)
    assert any(
        "gave work item alpha attempt 0, lower than the 1 the run has on record" in n
        for n in _notes(rig)
    ), _notes(rig)


def test_an_attempt_count_written_lower_in_tasks_jsonl_between_iterations_is_raised(
    tmp_path: Path,
) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[0]], max_iterations=4, max_item_attempts=2)

    def claim_only(item: str, attempt: int, cwd: Path) -> Any:
        return "continue_next", {"ac1": True}, ("trust me",)  # alpha.txt never written

    driver, runner = rig.driver([agent(rig, claim_only)])
    emit = driver.parts.record.emit
    lowered: list[int] = []

    def lower_once(event_type: Any, **fields: Any) -> Any:
        written = emit(event_type, **fields)
        if str(event_type) == "backlog_snapshot" and not lowered:
            rows = [json.loads(line) for line in _tasks_path(rig).read_text().splitlines()]
            lowered.append(rows[0]["attempt"])
            rows[0]["attempt"] = 0
            _tasks_path(rig).write_text("".join(json.dumps(r) + "\n" for r in rows))
        return written

    driver.parts.record.emit = lower_once  # type: ignore[method-assign]
    at_first_gate(rig, lambda s: setattr(s, "stop_requested", True))
    driver.run()
    assert lowered == [1]
    assert len(runner.requests) == 2  # not 3: the lowered count was not taken
    alpha = item_from_json(_items(rig)["alpha"])
    assert (alpha.status.value, alpha.attempt) == ("blocked", 2)
    assert any("tasks.jsonl gave work item alpha attempt 0" in n for n in _notes(rig)), _notes(rig)


def test_an_items_marks_rewritten_in_the_run_folder_do_not_hide_a_surface_violation(
    tmp_path: Path,
) -> None:
    fenced = {**ITEMS[0], "allowed_surface": ["alpha.txt", "file.txt"]}
    rig = arm_backlog(tmp_path, [fenced], max_iterations=2, max_item_attempts=0)

    def stray_then_hide(item: str, attempt: int, cwd: Path) -> Any:
        (cwd / "alpha.txt").write_text("fixed\n")
        if attempt == 1:
            rig.workspace.touched.add("secrets.env")
            return "reopen_micro", {}, ("not yet",)
        # The agent rewrites its item's marks as if it had started with secrets.env.
        mark = rig.workspace.mark().to_json()
        path = rig.folder / "item-marks" / f"{item}.json"
        path.write_text(json.dumps({"itemId": item, "start": mark, "since": mark, "outside": []}))
        return "continue_next", {"ac1": True}, ("done",)

    driver, _ = rig.driver([agent(rig, stray_then_hide)])
    driver.run()
    violations = [e["paths"] for e in _events(rig) if e["type"] == "surface_violation"]
    assert violations == [["secrets.env"], ["secrets.env"]]
    assert _items(rig)["alpha"]["status"] == "reopened"
    assert any("item-marks/alpha.json" in n for n in _notes(rig)), _notes(rig)


def test_the_final_gate_leaves_alone_an_item_completed_before_the_run_started(
    tmp_path: Path,
) -> None:
    # alpha was completed by an earlier run; its check no longer holds (time-dependent).
    done_before = forged_completion({**ITEMS[0], "depends_on": []}, 1)
    gamma = {**ITEMS[0], "id": "gamma", "prompt": "write gamma.txt"}
    gamma["acceptance_criteria"] = [{"id": "ac1", "text": "it", "check": "test -f gamma.txt"}]
    rig = arm_backlog(tmp_path, [done_before, gamma], max_iterations=5)

    def work(item: str, attempt: int, cwd: Path) -> Any:
        (cwd / f"{item}.txt").write_text("done\n")
        return "continue_next", {"ac1": True}, (f"wrote {item}.txt",)

    driver, runner = rig.driver([agent(rig, work)])
    assert driver.run().reason == "backlog_done"
    assert len(runner.requests) == 1  # gamma only: alpha is not this run's
    verified = [e for e in _events(rig) if e["type"] == "backlog_verified"]
    assert [(e["passed"], [i["itemId"] for i in e["items"]]) for e in verified] == [
        (True, ["gamma"])
    ]
    assert _items(rig)["alpha"]["status"] == "completed"


def test_the_final_gate_checks_an_item_completed_before_the_run_that_this_run_reopened(
    tmp_path: Path,
) -> None:
    rig = arm_backlog(tmp_path, [forged_completion({**ITEMS[0], "depends_on": []}, 1)])
    # A completion appended to the log (any process can) makes the item this run's.
    forge_completion(rig, "alpha", 1, attempt=1)
    driver, _ = rig.driver([agent(rig, _write_alpha)])
    assert driver.run().reason == "backlog_done"
    verified = [e for e in _events(rig) if e["type"] == "backlog_verified"]
    assert [i["itemId"] for i in verified[0]["items"]] == ["alpha"]
    assert verified[0]["passed"] is False


def test_a_start_too_large_to_log_and_deleted_never_lets_a_completion_through(
    tmp_path: Path,
) -> None:
    fenced = {**ITEMS[0], "allowed_surface": ["alpha.txt", "file.txt"]}
    rig = arm_backlog(tmp_path, [fenced], max_iterations=3)
    # Untracked build output: a start mark too large (and too random) for a log line.
    rig.workspace.touched.update(f"junk/{sha256_hex(str(n).encode())}" for n in range(400))

    def stray_and_hide(item: str, attempt: int, cwd: Path) -> Any:
        (cwd / "alpha.txt").write_text("fixed\n")
        rig.workspace.touched.add("secrets.env")
        (rig.folder / "item-marks" / f"{item}.json").unlink()
        (rig.folder / "iter-0001" / "workitem.json").unlink(missing_ok=True)
        return "continue_next", {"ac1": True}, ("done",)

    _crash_in_first_attempt(rig, stray_and_hide)
    marked = [e for e in _events(rig) if e["type"] == "workitem_mark"]
    assert marked[0].get("start") is None and "startZ" not in marked[0]  # its digest alone
    relaunched, _ = rig.driver([agent(rig, lambda *_: None)])
    relaunched.run()
    alpha = _items(rig)["alpha"]
    assert alpha["status"] != "completed"
    ends = [(e["status"], e.get("decision")) for e in _events(rig) if e["type"] == "workitem_end"]
    assert ends[0] == ("reopened", "surface_unverified")
    assert "cannot be checked" in alpha["completion"]["feedback"]
    notes = [n for n in _notes(rig) if "item-marks/alpha.json" in n]
    assert notes and "completion is not accepted" in notes[0]
    assert not any("checked against its iterations' changes" in n for n in _notes(rig))
