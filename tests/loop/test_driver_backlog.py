"""Backlog runs through the real driver, in-process: fake runner, fake workspace, fake
clock; real tasks.jsonl, real reports, real check commands."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autopilot.config import RunConfig
from autopilot.core.item_report import ItemDecision, ItemReport
from autopilot.core.structs import replace
from autopilot.loop.arming import PromptSource, arm_run
from autopilot.loop.runner import RunRequest
from autopilot.store.reports import write_report
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore, read_state
from tests.conftest import read_jsonl
from tests.fakes import FakeClock, FakeWorkspace, Rig, Scripted, claude_lines

ITEMS = [
    {
        "id": "alpha",
        "prompt": "write alpha.txt",
        "acceptance_criteria": [{"id": "ac1", "text": "exists", "check": "test -f alpha.txt"}],
    },
    {
        "id": "beta",
        "prompt": "write beta.txt saying fixed",
        "depends_on": ["alpha"],
        "acceptance_criteria": [{"id": "ac1", "text": "fixed", "check": "grep -q fixed beta.txt"}],
    },
    {"id": "gamma", "prompt": "write gamma.txt"},
]


def arm_backlog(tmp_path: Path, items: list[dict[str, Any]] = ITEMS, **config: Any) -> Rig:
    root = tmp_path / "runs"
    root.mkdir()
    cwd = tmp_path / "work"
    (cwd / ".autopilot").mkdir(parents=True)
    (cwd / ".autopilot" / "tasks.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    clock = FakeClock()
    run_id = arm_run(
        root, RunConfig(**config), PromptSource(text="backlog"), cwd, clock, mode="backlog"
    )
    return Rig(root, run_id, clock, FakeWorkspace())


def at_first_gate(rig: Rig, act: Callable[[RunState], None]) -> list[str]:
    """Make the rig's sleeper act as a person at the run's first gate: note its question
    and change the state with ``act`` (an answer, a stop). Returns the questions noted."""
    store = StateStore(rig.folder / "state.json")
    plain_sleep = rig.clock.sleep
    asked: list[str] = []

    def sleep(seconds: float) -> None:
        plain_sleep(seconds)
        state = store.read()
        if state.gate and not asked:
            asked.append(state.gate)
            store.update(act)

    rig.clock.sleep = sleep  # type: ignore[method-assign]
    return asked


def _item_of(request: RunRequest) -> str:
    prompt = request.attempt.prompt.read_text()
    match = re.search(r"^work-item: (\S+)$", prompt, re.MULTILINE)
    assert match, prompt
    return match.group(1)


def agent(
    rig: Rig,
    decide: Callable[[str, int, Path], tuple[str, dict[str, bool], tuple[str, ...]] | None],
    final: str = "Reported.",
) -> Scripted:
    """An agent that, for the item in its prompt, writes files and reports ``decide``'s answer."""
    cwd = rig.root.parent / "work"
    calls: dict[str, int] = {}

    def start(request: RunRequest) -> None:
        item = _item_of(request)
        calls[item] = calls.get(item, 0) + 1
        rig.workspace.edit()
        decided = decide(item, calls[item], cwd)
        if decided is not None:
            decision, criteria, evidence = decided
            report = ItemReport(item, ItemDecision(decision), criteria, evidence)
            write_report(rig.folder, report, ts_ms=rig.clock.now_ms(), iteration=None)

    return Scripted(claude_lines(final), on_start=start)


def _events(rig: Rig) -> list[dict[str, Any]]:
    return read_jsonl(rig.folder / "events.jsonl")


def _tasks(rig: Rig) -> dict[str, str]:
    path = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"
    return {
        d["id"]: d.get("status", "ready") for d in map(json.loads, path.read_text().splitlines())
    }


def _work_through(
    item: str, attempt: int, cwd: Path
) -> tuple[str, dict[str, bool], tuple[str, ...]]:
    content = "fixed" if item != "beta" or attempt > 1 else "draft"
    (cwd / f"{item}.txt").write_text(content + "\n")
    criteria = {"ac1": True} if item != "gamma" else {}
    return "continue_next", criteria, (f"wrote {item}.txt",)


def test_a_backlog_drains_in_order_and_a_failing_check_reopens_once(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, max_iterations=10)
    # The agent says COMPLETE every time: a promise alone never ends a backlog run.
    driver, runner = rig.driver([agent(rig, _work_through, final="Reported. COMPLETE")])
    result = driver.run()
    assert (result.terminal_type, result.reason, result.exit_code) == (
        "complete",
        "backlog_done",
        0,
    )
    assert [_item_of(r) for r in runner.requests] == ["alpha", "beta", "beta", "gamma"]
    assert _tasks(rig) == {"alpha": "completed", "beta": "completed", "gamma": "completed"}
    events = _events(rig)
    ends = [(e["itemId"], e["status"]) for e in events if e["type"] == "workitem_end"]
    assert ends == [
        ("alpha", "completed"),
        ("beta", "reopened"),
        ("beta", "completed"),
        ("gamma", "completed"),
    ]
    # The reopened attempt's prompt carries the failing check's output.
    third = runner.requests[2].attempt.prompt.read_text()
    assert (
        "reopen-target: micro" in third and "check ac1 ($ grep -q fixed beta.txt) exit 1" in third
    )
    # ... and the reopen notice, through the run's inbox (one message_delivered).
    assert "Work item beta was reopened (micro) after attempt 1: check ac1" in third
    delivered = [e for e in _events(rig) if e["type"] == "message_delivered"]
    assert [(e["kind"], e["iteration"]) for e in delivered] == [("reopened", 3)]
    # Events, tasks.jsonl and state.json agree.
    terminal = [e for e in events if e["type"] in ("complete", "abort")]
    assert [(e["type"], e["reason"]) for e in terminal] == [("complete", "backlog_done")]
    assert events[-1]["type"] == "complete"
    state = read_state(rig.folder / "state.json")
    assert (state.terminated, state.termination_reason, state.status) == (
        True,
        "backlog_done",
        "completed",
    )
    assert state.spend.iterations == 4
    snapshots = [e for e in events if e["type"] == "backlog_snapshot"]
    assert snapshots[-1]["counts"] == {"completed": 3}
    warnings = [e["note"] for e in events if e["type"] == "warning"]
    assert any("a completion promise does not end a backlog run" in w for w in warnings)


def test_a_hanging_check_is_ended_at_the_runs_check_timeout(tmp_path: Path) -> None:
    hangs = [
        {"id": "slow", "acceptance_criteria": [{"id": "ac1", "text": "x", "check": "sleep 600"}]}
    ]
    rig = arm_backlog(tmp_path, hangs, max_iterations=1, check_timeout_seconds=1)
    driver, _ = rig.driver([agent(rig, lambda *_: ("continue_next", {"ac1": True}, ()))])
    assert driver.run().reason == "max_iterations"
    ends = [e for e in _events(rig) if e["type"] == "workitem_end"]
    assert [(e["itemId"], e["status"]) for e in ends] == [("slow", "reopened")]
    assert _tasks(rig) == {"slow": "reopened"}
    log = rig.folder / "iter-0001" / "check-ac1.log"
    assert log.exists()


def test_a_missing_report_resumes_the_same_item_then_retry(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[2]], max_iterations=5)

    def decide(item: str, attempt: int, cwd: Path) -> Any:
        if attempt == 1:
            return None
        if attempt == 2:
            return "retry_same_unit", {}, ("half done",)
        return "continue_next", {}, ("done",)

    driver, runner = rig.driver([agent(rig, decide)])
    result = driver.run()
    assert result.reason == "backlog_done"
    prompts = [r.attempt.prompt.read_text() for r in runner.requests]
    assert "pending-decision: missing" in prompts[1]
    assert "previous-attempt:\n- half done" in prompts[2]
    ends = [e.get("decision") for e in _events(rig) if e["type"] == "workitem_end"]
    assert ends == [None, "retry_same_unit", "continue_next"]


def test_stop_ends_the_run(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path)
    driver, _ = rig.driver([agent(rig, lambda i, n, c: ("stop", {}, ("enough",)))])
    result = driver.run()
    assert (result.terminal_type, result.reason, result.exit_code) == ("abort", "user_stopped", 130)
    assert _tasks(rig)["alpha"] == "stopped"
    assert "reported stop for work item alpha" in str(result.note)


def test_ask_user_meta_gates_the_run_and_an_answer_resumes_it(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[2]])

    def decide(item: str, attempt: int, cwd: Path) -> Any:
        if attempt == 1:
            return "ask_user_meta", {}, ("Which format?",)
        return "continue_next", {}, ("done",)

    store = StateStore(rig.folder / "state.json")
    seen: list[str] = []
    plain_sleep = rig.clock.sleep

    def sleep(seconds: float) -> None:
        plain_sleep(seconds)
        state = store.read()
        if state.status == "awaiting_user" and not seen:
            seen.append(str(state.gate))
            store.update(lambda s: setattr(s, "gate_answer", "markdown"))

    rig.clock.sleep = sleep  # type: ignore[method-assign]
    driver, runner = rig.driver([agent(rig, decide)])
    result = driver.run()
    assert result.reason == "backlog_done"
    assert seen == ["Which format?"]
    gates = [e for e in _events(rig) if e["type"] == "gate"]
    assert [g.get("question") or g.get("answer") for g in gates] == ["Which format?", "markdown"]
    second = runner.requests[1].attempt.prompt.read_text()
    assert "- question: Which format?\n- answer: markdown" in second


def test_a_surface_violation_reopens_the_item(tmp_path: Path) -> None:
    items = [{**ITEMS[2], "allowed_surface": ["gamma.txt", "file.txt"]}]
    rig = arm_backlog(tmp_path, items)

    def decide(item: str, attempt: int, cwd: Path) -> Any:
        # The second attempt undoes the change (left there, it would reopen it again).
        rig.workspace.touched = {"secrets.txt"} if attempt == 1 else set()
        return "continue_next", {}, ("done",)

    driver, runner = rig.driver([agent(rig, decide)])
    assert driver.run().reason == "backlog_done"
    violations = [e for e in _events(rig) if e["type"] == "surface_violation"]
    assert [v["paths"] for v in violations] == [["secrets.txt"]]
    assert (
        "outside the allowed surface: secrets.txt" in runner.requests[1].attempt.prompt.read_text()
    )


def test_a_backlog_already_done_completes_at_once(tmp_path: Path) -> None:
    done = {**ITEMS[2], "status": "completed", "completion": {"state": "passed", "verdict": "pass"}}
    rig = arm_backlog(tmp_path, [done])
    driver, runner = rig.driver([agent(rig, _work_through)])
    assert driver.run().reason == "backlog_done"
    assert runner.requests == []


def test_a_backlog_held_back_by_a_person_waits_for_an_answer(tmp_path: Path) -> None:
    blocked = {**ITEMS[2], "status": "blocked", "blocked_reason": "waiting for the API key"}
    rig = arm_backlog(tmp_path, [blocked])
    asked = at_first_gate(rig, lambda s: setattr(s, "gate_answer", "the key is in .env"))
    driver, runner = rig.driver([agent(rig, lambda i, n, c: ("continue_next", {}, ("ok",)))])
    assert driver.run().reason == "backlog_done"
    assert asked == ["no work item can start: gamma is blocked: waiting for the API key"]
    assert "answer: the key is in .env" in runner.requests[0].attempt.prompt.read_text()


def test_a_lying_agent_in_a_backlog_run_halts_on_stagnation(tmp_path: Path) -> None:
    """It reports continue_next, prints COMPLETE and changes nothing: its checks fail,
    the promise is refused, and the third identical answer halts the run (before the
    item's attempts run out: those would block it and move on)."""
    rig = arm_backlog(tmp_path, max_iterations=20, max_item_attempts=5)
    cwd = rig.root.parent / "work"

    def start(request: RunRequest) -> None:
        report = ItemReport(_item_of(request), ItemDecision.CONTINUE_NEXT, {"ac1": True}, ())
        write_report(rig.folder, report, ts_ms=rig.clock.now_ms(), iteration=None)

    liar = Scripted(claude_lines("I did everything.\n\nCOMPLETE", tools=0), on_start=start)
    driver, runner = rig.driver([liar])
    result = driver.run()
    assert (result.terminal_type, result.reason) == ("abort", "stagnation")
    assert len(runner.requests) == 3
    streaks = [(e["iteration"], e["streak"]) for e in _events(rig) if e["type"] == "stagnation"]
    assert streaks == [(1, 1), (2, 2), (3, 3)]
    assert not (cwd / "alpha.txt").exists()


def test_a_surface_violation_stays_on_the_items_record_until_it_is_done(tmp_path: Path) -> None:
    items = [
        {
            **ITEMS[1],
            "depends_on": [],
            "allowed_surface": ["beta.txt", "file.txt"],
        }
    ]
    rig = arm_backlog(tmp_path, items, max_iterations=6)

    def decide(item: str, attempt: int, cwd: Path) -> Any:
        if attempt == 1:
            rig.workspace.touched = {"secrets.txt"}  # outside the surface
        if attempt == 2:
            rig.workspace.touched = set()  # undone: no change outside the surface now
        (cwd / "beta.txt").write_text("fixed\n" if attempt == 3 else "draft\n")
        return "continue_next", {"ac1": True}, (f"attempt {attempt}",)

    driver, runner = rig.driver([agent(rig, decide)])
    assert driver.run().reason == "backlog_done"
    assert len(runner.requests) == 3
    # The undo is no violation: the surface is checked against the item's start.
    violations = [e["paths"] for e in _events(rig) if e["type"] == "surface_violation"]
    assert violations == [["secrets.txt"]]
    ends = [e["status"] for e in _events(rig) if e["type"] == "workitem_end"]
    assert ends == ["reopened", "reopened", "completed"]
    # The third prompt, from tasks.jsonl read again, still names the violation, though
    # the second attempt's failing check is now its feedback.
    third = runner.requests[2].attempt.prompt.read_text()
    assert "check ac1 ($ grep -q fixed beta.txt) exit 1" in third
    assert (
        "- an earlier attempt changed files outside the allowed surface (autopilot reverts "
        "nothing; undo what the item does not need): secrets.txt\n" in third
    )
    # The completed item's record carries it too.
    path = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"
    (line,) = [json.loads(text) for text in path.read_text().splitlines()]
    assert line["status"] == "completed"
    assert line["completion"]["surface_violations"] == ["secrets.txt"]
    assert (
        "surface-violation (an earlier attempt; autopilot reverts nothing): secrets.txt"
        in line["completion"]["evidence"]
    )


def test_an_item_whose_checks_keep_failing_is_blocked_and_the_run_moves_on(
    tmp_path: Path,
) -> None:
    """An agent that claims every criterion each time (and changes files, so it is
    progress) while the check fails: after 3 attempts the item is blocked with the
    failing check, the next item is worked on, and a person's answer gives it more."""
    rig = arm_backlog(tmp_path, [ITEMS[0], ITEMS[2]], max_iterations=5)

    def lie(item: str, attempt: int, cwd: Path) -> Any:
        (cwd / "junk.txt").write_text(f"{item} {attempt}\n")
        return "continue_next", ({"ac1": True} if item == "alpha" else {}), ("all good",)

    asked = at_first_gate(rig, lambda s: setattr(s, "gate_answer", "alpha.txt goes in the root"))
    driver, runner = rig.driver([agent(rig, lie)])
    result = driver.run()
    assert result.reason == "max_iterations"
    assert [_item_of(r) for r in runner.requests] == ["alpha", "alpha", "alpha", "gamma", "alpha"]
    ends = [(e["itemId"], e["status"]) for e in _events(rig) if e["type"] == "workitem_end"]
    assert ends[2:4] == [("alpha", "blocked"), ("gamma", "completed")]
    assert asked == [
        "no work item can start: alpha is blocked: 3 attempts did not complete it (the limit "
        "is 3); last verdict fail: check ac1 ($ test -f alpha.txt) exit 1; its output ended "
        "with: (nothing); autopilot tasks unblock alpha gives it 3 more"
    ]
    # The answer counts its attempts afresh: attempt 4 reopens it, it is not blocked.
    assert _tasks(rig) == {"alpha": "reopened", "gamma": "completed"}


def test_lines_the_agent_adds_that_autopilot_cannot_take_are_kept_aside_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[2]], max_iterations=5)
    cwd = rig.root.parent / "work"
    tasks = cwd / ".autopilot" / "tasks.jsonl"
    added = [
        b'{"id": "gamma", "prompt": "a second gamma"}',
        b"{not json",
        b'{"id": "sneaky", "prompt": "x", "status": "completed"}',
        b'{"id": "graded", "prompt": "x", "completion": {"state": "passed", "verdict": "pass"}}',
        b'{"id": "orphan", "prompt": "x", "depends_on": ["nowhere"]}',
        b'{"id": "child", "prompt": "x", "depends_on": ["orphan"]}',
        b'{"id": "delta", "prompt": "write delta.txt", "depends_on": ["gamma"]}',
    ]

    def decide(item: str, attempt: int, cwd: Path) -> Any:
        if item == "gamma":
            with tasks.open("ab") as file:
                file.write(b"".join(line + b"\n" for line in added))
        return "continue_next", {}, ("done",)

    store = StateStore(rig.folder / "state.json")
    plain_sleep = rig.clock.sleep

    def sleep(seconds: float) -> None:
        plain_sleep(seconds)
        hold = store.read().hold
        assert hold is None, f"the run holds: {hold}"

    rig.clock.sleep = sleep  # type: ignore[method-assign]
    driver, runner = rig.driver([agent(rig, decide)])
    result = driver.run()
    # The run is not held: the valid new item is worked on, and the backlog drains.
    assert result.reason == "backlog_done"
    assert [_item_of(r) for r in runner.requests] == ["gamma", "delta"]
    assert _tasks(rig) == {"gamma": "completed", "delta": "completed"}
    kept = (rig.folder / "iter-0001" / "tasks-rejected.jsonl").read_bytes()
    assert kept == b"".join(line + b"\n" for line in added[:6])
    warnings = [e for e in _events(rig) if e["type"] == "warning" and e.get("rejected")]
    assert len(warnings) == 1
    assert warnings[0]["note"].startswith(
        "6 line(s) the agent added to .autopilot/tasks.jsonl were taken out and kept in "
        "iter-0001/tasks-rejected.jsonl in the run's folder: "
    )
    assert warnings[0]["rejected"] == [
        "work item 'gamma' repeats an id an earlier line has",
        "line 3: not valid JSON (Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1))",
        "new work item 'sneaky' was added as completed or with a completion of its own (an "
        "added item starts ready, and only autopilot's checks complete it)",
        "new work item 'graded' was added as ready or with a completion of its own (an "
        "added item starts ready, and only autopilot's checks complete it)",
        "new work item 'orphan' depends on nowhere, which the backlog does not have",
        "new work item 'child' depends on orphan, which the backlog does not have",
    ]


def test_a_change_left_outside_the_surface_reopens_every_attempt_until_the_item_is_blocked(
    tmp_path: Path,
) -> None:
    """A surface reopen is an attempt like any other: the item whose attempts keep a
    change outside its surface (another file each time) is blocked at the attempt
    limit, its reason naming the files, and the run goes on with the next item."""
    fenced = {**ITEMS[2], "allowed_surface": ["gamma.txt", "file.txt"]}
    rig = arm_backlog(tmp_path, [fenced, ITEMS[0]], max_iterations=8)

    def stray(item: str, attempt: int, cwd: Path) -> Any:
        if item == "gamma":
            rig.workspace.touched.add(f"stray-{attempt}.txt")
        return _work_through(item, attempt, cwd)

    asked = at_first_gate(rig, lambda s: setattr(s, "stop_requested", True))
    driver, runner = rig.driver([agent(rig, stray)])
    result = driver.run()
    assert result.reason == "user_stopped"
    assert [_item_of(r) for r in runner.requests] == ["gamma", "gamma", "gamma", "alpha"]
    violations = [e["paths"] for e in _events(rig) if e["type"] == "surface_violation"]
    assert violations == [
        ["stray-1.txt"],
        ["stray-1.txt", "stray-2.txt"],
        ["stray-1.txt", "stray-2.txt", "stray-3.txt"],
    ]
    ends = [(e["itemId"], e["status"]) for e in _events(rig) if e["type"] == "workitem_end"]
    assert ends == [
        ("gamma", "reopened"),
        ("gamma", "reopened"),
        ("gamma", "blocked"),
        ("alpha", "completed"),
    ]
    reason = (
        "3 attempts did not complete it (the limit is 3); last verdict fail: changed files "
        "outside the allowed surface: stray-1.txt, stray-2.txt, stray-3.txt; autopilot tasks "
        "unblock gamma gives it 3 more"
    )
    assert asked == [f"no work item can start: gamma is blocked: {reason}"]
    path = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"
    gamma = json.loads(path.read_text().splitlines()[0])
    assert (gamma["status"], gamma["attempt"], gamma["blocked_reason"]) == ("blocked", 3, reason)


def test_the_attempt_limit_is_the_armed_one_not_one_written_into_state_json(
    tmp_path: Path,
) -> None:
    fenced = {**ITEMS[2], "allowed_surface": ["gamma.txt", "file.txt"]}
    rig = arm_backlog(tmp_path, [fenced], max_iterations=4, max_item_attempts=1)
    store = StateStore(rig.folder / "state.json")
    store.update(lambda s: setattr(s, "config", replace(s.config, max_item_attempts=0)))

    def stray(item: str, attempt: int, cwd: Path) -> Any:
        rig.workspace.touched.add(f"stray-{attempt}.txt")
        return "continue_next", {}, ("done",)

    plain_sleep = rig.clock.sleep

    def sleep(seconds: float) -> None:
        plain_sleep(seconds)
        if store.read().gate:
            store.update(lambda s: setattr(s, "stop_requested", True))

    rig.clock.sleep = sleep  # type: ignore[method-assign]
    driver, runner = rig.driver([agent(rig, stray)])
    assert driver.run().reason == "user_stopped"
    assert len(runner.requests) == 1
    assert _tasks(rig) == {"gamma": "blocked"}


def test_the_run_marks_its_turn_while_the_agent_works_and_clears_it_after(
    tmp_path: Path,
) -> None:
    """A person's change is refused while the mark is there (``cli.tasks_guard``)."""
    from autopilot.store.backlog_turn import turn_of

    rig = arm_backlog(tmp_path, [ITEMS[2]], max_iterations=3)
    seen: list[Any] = []

    def decide(item: str, attempt: int, cwd: Path) -> Any:
        seen.append(turn_of(rig.folder))
        return "continue_next", {}, ("wrote it",)

    driver, _ = rig.driver([agent(rig, decide)])
    assert driver.run().reason == "backlog_done"
    assert seen == [(1, "gamma")]
    assert turn_of(rig.folder) is None


def test_an_answer_where_no_item_can_start_gives_every_spent_item_more_attempts(
    tmp_path: Path,
) -> None:
    """Two items blocked for their attempts: the answer at the gate goes to both (the
    gate's answered event names them), and an item blocked again names its attempts."""
    failing = {"acceptance_criteria": [{"id": "ac1", "text": "x", "check": "false"}]}
    items = [{"id": "alpha", "prompt": "a", **failing}, {"id": "beta", "prompt": "b", **failing}]
    rig = arm_backlog(tmp_path, items, max_iterations=4, max_item_attempts=1)
    asked = at_first_gate(rig, lambda s: setattr(s, "gate_answer", "try once more"))
    driver, runner = rig.driver([agent(rig, lambda *_: ("continue_next", {"ac1": True}, ("ok",)))])
    assert driver.run().reason == "max_iterations"
    assert asked and asked[0].startswith("no work item can start: alpha is blocked: ")
    assert [_item_of(r) for r in runner.requests] == ["alpha", "beta", "alpha", "beta"]
    (answered,) = [e for e in _events(rig) if e["type"] == "gate" and e["state"] == "answered"]
    assert answered["itemIds"] == ["alpha", "beta"]
    path = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"
    reasons = [json.loads(line)["blocked_reason"] for line in path.read_text().splitlines()]
    assert [r.split(" (")[0] for r in reasons] == ["attempt 2 did not complete it"] * 2


def test_a_backlog_gate_is_released_when_a_person_unblocks_the_item_in_the_file(
    tmp_path: Path,
) -> None:
    """Doing what the gate says (``tasks unblock gamma``) is enough: no answer needed."""
    blocked = {**ITEMS[2], "status": "blocked", "blocked_reason": "waiting for the API key"}
    rig = arm_backlog(tmp_path, [blocked])
    path = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"

    def unblock(_: RunState) -> None:
        path.write_text(json.dumps(ITEMS[2]) + "\n")

    asked = at_first_gate(rig, unblock)
    driver, runner = rig.driver([agent(rig, lambda i, n, c: ("continue_next", {}, ("ok",)))])
    assert driver.run().reason == "backlog_done"
    assert asked == ["no work item can start: gamma is blocked: waiting for the API key"]
    assert [_item_of(r) for r in runner.requests] == ["gamma"]
    gates = [e for e in _events(rig) if e["type"] == "gate"]
    assert [g["state"] for g in gates] == ["waiting", "released"]
    assert "released by the backlog change" in gates[1]["note"]
    assert read_state(rig.folder / "state.json").gate is None


def test_an_items_own_question_is_not_released_by_a_change_to_the_file(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[2]], max_iterations=3)
    path = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"
    seen: list[str] = []
    store = StateStore(rig.folder / "state.json")
    plain_sleep = rig.clock.sleep

    def sleep(seconds: float) -> None:
        plain_sleep(seconds)
        gate = store.read().gate
        if gate and len(seen) < 3:
            seen.append(gate)
            path.write_text(path.read_text() + "")  # the same items, written again
            if len(seen) == 3:
                store.update(lambda s: setattr(s, "gate_answer", "markdown"))

    rig.clock.sleep = sleep  # type: ignore[method-assign]

    def ask(item: str, n: int, cwd: Path) -> tuple[str, dict[str, bool], tuple[str, ...]]:
        if n == 1:
            return "ask_user_meta", {}, ("Which format?",)
        return "continue_next", {}, ("ok",)

    driver, _ = rig.driver([agent(rig, ask)])
    driver.run()
    assert seen and all(g == seen[0] for g in seen) and len(seen) == 3
    states = [e.get("state") for e in _events(rig) if e["type"] == "gate"]
    assert "released" not in states and "answered" in states


def test_an_item_blocked_for_its_attempts_ends_the_stagnation_streak_and_the_next_is_tried(
    tmp_path: Path,
) -> None:
    """The liar again, at the default 3 attempts: the third blocks alpha (the backlog's
    verdict, not the run's stagnation) and gamma is tried next."""
    rig = arm_backlog(tmp_path, [ITEMS[0], ITEMS[2]], max_iterations=20)

    def start(request: RunRequest) -> None:
        report = ItemReport(_item_of(request), ItemDecision.CONTINUE_NEXT, {"ac1": True}, ())
        write_report(rig.folder, report, ts_ms=rig.clock.now_ms(), iteration=None)

    liar = Scripted(claude_lines("I did everything.\n\nCOMPLETE", tools=0), on_start=start)
    asked = at_first_gate(rig, lambda s: setattr(s, "stop_requested", True))
    driver, runner = rig.driver([liar])
    result = driver.run()
    assert result.reason != "stagnation"
    assert [_item_of(r) for r in runner.requests][:4] == ["alpha", "alpha", "alpha", "gamma"]
    ends = [(e["itemId"], e["status"]) for e in _events(rig) if e["type"] == "workitem_end"]
    assert ("alpha", "blocked") in ends
    streaks = [(e["iteration"], e["streak"]) for e in _events(rig) if e["type"] == "stagnation"]
    assert (3, 3) not in streaks and asked


def test_the_agent_is_told_its_work_item_and_attempt_in_its_environment(tmp_path: Path) -> None:
    failing = {"acceptance_criteria": [{"id": "ac1", "text": "x", "check": "false"}]}
    items = [{"id": "alpha", "prompt": "a", **failing}, {"id": "gamma", "prompt": "g"}]
    rig = arm_backlog(tmp_path, items, max_iterations=3, max_item_attempts=2)
    driver, runner = rig.driver([agent(rig, lambda *_: ("continue_next", {"ac1": True}, ("ok",)))])
    driver.run()
    told = [
        (r.env.get("AUTOPILOT_WORK_ITEM"), r.env.get("AUTOPILOT_ATTEMPT")) for r in runner.requests
    ]
    assert told == [("alpha", "1"), ("alpha", "2"), ("gamma", "1")]
    assert all(r.env["AUTOPILOT_ITERATION"] == str(n) for n, r in enumerate(runner.requests, 1))


def test_an_answer_given_as_a_person_unblocks_the_item_reaches_its_next_prompt(
    tmp_path: Path,
) -> None:
    """``tasks unblock gamma`` and ``autopilot answer`` at once: the item is no longer
    blocked when the answer is taken, and the answer goes to it all the same."""
    blocked = {**ITEMS[2], "status": "blocked", "blocked_reason": "waiting for the API key"}
    rig = arm_backlog(tmp_path, [blocked])
    path = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"

    def unblock_and_answer(state: RunState) -> None:
        path.write_text(json.dumps(ITEMS[2]) + "\n")
        state.gate_answer = "use the staging key"

    at_first_gate(rig, unblock_and_answer)
    driver, runner = rig.driver([agent(rig, lambda i, n, c: ("continue_next", {}, ("ok",)))])
    assert driver.run().reason == "backlog_done"
    assert "answer: use the staging key" in runner.requests[0].attempt.prompt.read_text()
    (answered,) = [e for e in _events(rig) if e["type"] == "gate" and e["state"] == "answered"]
    assert answered["itemIds"] == ["gamma"]


def test_an_answer_written_as_the_gate_is_released_is_taken_not_wiped(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The answer lands between the driver's last read and the release's write: the
    write that clears the gate takes it (it is not lost with the gate)."""
    from autopilot.loop.backlog import BacklogShell

    blocked = {**ITEMS[2], "status": "blocked", "blocked_reason": "waiting for the API key"}
    rig = arm_backlog(tmp_path, [blocked])
    path = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"
    store = StateStore(rig.folder / "state.json")
    released = BacklogShell.gate_released

    def released_as_answered(shell: BacklogShell, question: str) -> bool:
        if store.read().gate is not None and '"blocked"' in path.read_text():
            path.write_text(json.dumps(ITEMS[2]) + "\n")  # the person's unblock
        went = released(shell, question)
        if went:
            store.update(lambda s: setattr(s, "gate_answer", "use the staging key"))
        return went

    monkeypatch.setattr(BacklogShell, "gate_released", released_as_answered)
    driver, runner = rig.driver([agent(rig, lambda i, n, c: ("continue_next", {}, ("ok",)))])
    assert driver.run().reason == "backlog_done"
    assert "answer: use the staging key" in runner.requests[0].attempt.prompt.read_text()
    states = [e["state"] for e in _events(rig) if e["type"] == "gate"]
    assert states == ["waiting", "answered"]
