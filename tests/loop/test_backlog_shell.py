"""A backlog run's boundary work on real files: reports, checks, undoing the agent's edits."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from autopilot.core.item_report import ItemDecision, ItemReport
from autopilot.core.workitems import ItemStatus, item_from_json
from autopilot.loop.backlog import BacklogShell
from autopilot.store.backlog import Backlog
from autopilot.store.reports import write_report

ITEMS = [
    {
        "id": "a",
        "prompt": "write a.md",
        "acceptance_criteria": [{"id": "ac1", "text": "a.md exists", "check": "test -f a.md"}],
    },
    {
        "id": "b",
        "prompt": "write b.md",
        "depends_on": ["a"],
        "allowed_surface": ["b.md"],
        "acceptance_criteria": [{"id": "ac1", "text": "says fixed", "check": "grep -q fixed b.md"}],
    },
    {"id": "c", "prompt": "write c.md"},
]


class Log:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event_type: str, **fields: Any) -> None:
        self.events.append({"type": event_type, **fields})

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    (path / ".autopilot").mkdir(parents=True)
    (path / ".autopilot" / "tasks.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    return path


def _shell(work: Path, log: Log) -> BacklogShell:
    run_folder = work.parent / "run"
    run_folder.mkdir(exist_ok=True)
    return BacklogShell(
        Backlog(work, work.parent / "locks"),
        "r-1",
        run_folder,
        log.emit,
        log_events=lambda: list(log.events),
        check_timeout_seconds=30,
    )


def _statuses(work: Path) -> dict[str, str]:
    lines = (work / ".autopilot" / "tasks.jsonl").read_text().splitlines()
    # A line autopilot did not change is kept as written (no status: ready).
    return {d["id"]: d.get("status", "ready") for d in map(json.loads, lines)}


def _report(shell: BacklogShell, item: str, decision: str, **criteria: bool) -> None:
    write_report(
        shell.run_folder,
        ItemReport(item, ItemDecision(decision), criteria, ("e",)),
        ts_ms=1,
        iteration=None,
    )


def test_a_backlog_with_a_dependency_drains_in_order_and_a_failing_check_reopens(
    work: Path,
) -> None:
    log = Log()
    shell = _shell(work, log)
    folder = work.parent / "iter"
    folder.mkdir()
    begun = shell.begin(1)
    assert begun.item is not None and begun.item.id == "a"
    assert _statuses(work)["a"] == "running"
    (work / "a.md").write_text("a")
    _report(shell, "a", "continue_next", ac1=True)
    ended = shell.end(1, folder, ["a.md"], work)
    assert ended is not None and ended.item.status is ItemStatus.COMPLETED
    assert ended.checks is not None and ended.checks.passed
    assert (folder / "check-ac1.log").exists()
    # b: the check fails once, the item is reopened with the output, then passes.
    begun = shell.begin(2)
    assert begun.item is not None and begun.item.id == "b"
    (work / "b.md").write_text("first try\n")
    _report(shell, "b", "continue_next", ac1=True)
    ended = shell.end(2, folder, ["b.md"], work)
    assert ended is not None and ended.item.status is ItemStatus.REOPENED
    begun = shell.begin(3)
    assert begun.item is not None and begun.item.id == "b" and begun.item.attempt == 2
    assert begun.prompt is not None and "check ac1 ($ grep -q fixed b.md) exit 1" in begun.prompt
    (work / "b.md").write_text("fixed\n")
    _report(shell, "b", "continue_next", ac1=True)
    ended = shell.end(3, folder, ["b.md"], work)
    assert ended is not None and ended.item.status is ItemStatus.COMPLETED
    begun = shell.begin(4)
    assert begun.item is not None and begun.item.id == "c"
    _report(shell, "c", "continue_next")
    shell.end(4, folder, [], work)
    assert shell.begin(5).done
    assert _statuses(work) == {"a": "completed", "b": "completed", "c": "completed"}
    assert log.types().count("workitem_end") == 4


def test_a_missing_report_resumes_the_same_item(work: Path) -> None:
    log = Log()
    shell = _shell(work, log)
    shell.begin(1)
    ended = shell.end(1, work.parent, [], work)
    assert ended is not None and ended.decision is None
    begun = shell.begin(2)
    assert begun.item is not None and begun.item.id == "a" and begun.item.attempt == 1
    assert begun.prompt is not None and "pending-decision: missing" in begun.prompt


def test_a_bad_report_is_refused_with_an_event(work: Path) -> None:
    log = Log()
    shell = _shell(work, log)
    shell.begin(1)
    _report(shell, "a", "continue_next")  # no pass for ac1
    ended = shell.end(1, work.parent, [], work)
    assert ended is not None and ended.decision is None
    warnings = [e["note"] for e in log.events if e["type"] == "warning"]
    assert any("continue_next report was refused" in w for w in warnings)


def test_a_surface_violation_reopens_and_nothing_is_reverted(work: Path) -> None:
    log = Log()
    shell = _shell(work, log)
    for n, item in enumerate(("a",), 1):
        shell.begin(n)
        (work / "a.md").write_text("a")
        _report(shell, item, "continue_next", ac1=True)
        shell.end(n, work.parent, ["a.md"], work)
    shell.begin(2)
    (work / "secrets.txt").write_text("x")
    _report(shell, "b", "continue_next", ac1=True)
    ended = shell.end(2, work.parent, ["b.md", "secrets.txt"], work)
    assert ended is not None and ended.violations == ("secrets.txt",)
    assert ended.item.status is ItemStatus.REOPENED
    assert (work / "secrets.txt").exists()
    violation = next(e for e in log.events if e["type"] == "surface_violation")
    assert violation["paths"] == ["secrets.txt"]
    prompt = shell.begin(3).prompt
    assert prompt is not None
    assert "changed files outside the allowed surface: secrets.txt" in prompt


def test_the_agent_cannot_complete_its_own_item_by_editing_the_file(work: Path) -> None:
    log = Log()
    shell = _shell(work, log)
    shell.begin(1)
    path = work / ".autopilot" / "tasks.jsonl"
    path.write_text(json.dumps({**ITEMS[0], "status": "completed"}) + "\n")
    ended = shell.end(1, work.parent, [".autopilot/tasks.jsonl"], work)
    assert ended is not None and ended.item.status is ItemStatus.RUNNING
    assert _statuses(work) == {"a": "running", "b": "ready", "c": "ready"}
    notes = [e["note"] for e in log.events if e["type"] == "warning"]
    assert any("were changed while the agent worked; undone" in n for n in notes)
    assert any("b, c were removed while the agent worked; restored" in n for n in notes)


def test_a_deleted_file_is_written_again_from_the_log(work: Path) -> None:
    log = Log()
    shell = _shell(work, log)
    shell.begin(1)
    _report(shell, "a", "stop")
    shell.end(1, work.parent, [], work)
    (work / ".autopilot" / "tasks.jsonl").unlink()
    # A new driver (after a crash) knows the backlog only from the log.
    fresh = _shell(work, log)
    begun = fresh.begin(2)
    assert begun.item is not None and begun.item.id == "c"
    assert _statuses(work) == {"a": "stopped", "b": "ready", "c": "running"}
    assert any("written again from the run's log" in e.get("note", "") for e in log.events)


def test_a_malformed_line_holds_the_run_and_is_not_rewritten(work: Path) -> None:
    log = Log()
    shell = _shell(work, log)
    path = work / ".autopilot" / "tasks.jsonl"
    path.write_text(path.read_text() + "{broken\n")
    before = path.read_bytes()
    begun = shell.begin(1)
    assert begun.item is None
    assert begun.hold == (
        "fix .autopilot/tasks.jsonl first: .autopilot/tasks.jsonl line 4: not valid JSON "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    )
    assert path.read_bytes() == before


def test_ask_user_meta_then_an_answer(work: Path) -> None:
    log = Log()
    shell = _shell(work, log)
    shell.begin(1)
    write_report(
        shell.run_folder,
        ItemReport("a", ItemDecision.ASK_USER_META, {}, ("Which db?",)),
        ts_ms=1,
        iteration=1,
    )
    ended = shell.end(1, work.parent, [], work)
    assert ended is not None and ended.question == "Which db?"
    assert shell.begin(2).item is not None  # c has no dependency on a
    (answered,) = shell.answer("sqlite", "Which db?")
    assert answered.status is ItemStatus.READY
    assert answered.completion.feedback == "question: Which db?\nanswer: sqlite"


def test_backlog_problems_are_told_once(work: Path) -> None:
    path = work / ".autopilot" / "tasks.jsonl"
    path.write_text(path.read_text() + '{"id":"d","depends_on":["nope"]}\n')
    log = Log()
    shell = _shell(work, log)
    shell.begin(1)
    shell.end(1, work.parent, [], work)
    shell.begin(2)
    notes = [e["note"] for e in log.events if e["type"] == "warning"]
    assert notes == ["tasks.jsonl: work item 'd' depends on 'nope', which does not exist"]


def test_a_line_broken_while_the_agent_works_is_kept_aside_and_the_run_goes_on(
    work: Path,
) -> None:
    log = Log()
    shell = _shell(work, log)
    shell.begin(1)
    path = work / ".autopilot" / "tasks.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(1, b'{"id": "d", oops\n')  # a half line, as line 2, during the iteration
    lines.append(b'{"id": "e", "prompt": "a valid item added meanwhile"}\n')
    path.write_bytes(b"".join(lines))
    _report(shell, "a", "continue_next", ac1=True)
    (work / "a.md").write_text("a\n")
    ended = shell.end(1, work.parent, ["a.md"], work)
    assert ended is not None and ended.item.status is ItemStatus.COMPLETED
    # Taken out of the file (every other line in its place), kept byte for byte.
    after = path.read_bytes().splitlines(keepends=True)
    assert len(after) == len(lines) - 1 and after[1:] == lines[2:]
    assert (work.parent / "tasks-rejected.jsonl").read_bytes() == b'{"id": "d", oops\n'
    warnings = [e for e in log.events if e["type"] == "warning" and e.get("rejected")]
    assert [w["rejected"] for w in warnings] == [
        [
            "line 2: not valid JSON (Expecting property name enclosed in double quotes: "
            "line 1 column 13 (char 12))",
        ]
    ]
    # The run is not held; the valid added item stays and is worked on in its turn.
    begun = shell.begin(2)
    assert begun.hold is None and begun.item is not None and begun.item.id == "b"
    assert _statuses(work)["e"] == "ready"


def test_an_item_another_terminal_adds_during_a_boundary_is_kept(work: Path) -> None:
    # The boundary reads, plans and writes under the backlog's lock: an add from
    # another terminal lands before or after, never in between (and is never lost).
    path = work / ".autopilot" / "tasks.jsonl"
    path.write_text(path.read_text() + '{"id":"d","depends_on":["nope"]}\n')
    log = Log()
    shell = _shell(work, log)
    other = Backlog(work, work.parent / "locks")
    adding: list[threading.Thread] = []

    def emit(event_type: str, **fields: Any) -> None:
        log.emit(event_type, **fields)
        if event_type == "warning" and not adding:  # between the read and the write
            late = item_from_json({"id": "late"})
            adding.append(threading.Thread(target=other.update, args=(lambda f: f.append([late]),)))
            adding[0].start()
            adding[0].join(timeout=1.0)

    shell.emit = emit
    begun = shell.begin(1)
    adding[0].join()
    assert begun.item is not None and begun.item.id == "a"
    assert _statuses(work) == {
        "a": "running",
        "b": "ready",
        "c": "ready",
        "d": "ready",
        "late": "ready",
    }


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_a_file_the_agent_replaces_with_something_unreadable(work: Path, kind: str) -> None:
    log = Log()
    shell = _shell(work, log)
    shell.begin(1)
    path = work / ".autopilot" / "tasks.jsonl"
    path.unlink()
    if kind == "symlink":
        path.symlink_to(work.parent / "elsewhere.jsonl")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    _report(shell, "a", "stop")
    ended = shell.end(1, work.parent, [], work)  # never raises: the run goes on
    assert ended is not None and ended.item.status is ItemStatus.STOPPED
    notes = [e["note"] for e in log.events if e["type"] == "warning"]
    assert not any("was deleted" in n for n in notes)
    if kind == "folder":
        assert any("the run holds until .autopilot/tasks.jsonl can be written" in n for n in notes)
        held = shell.begin(2)
        assert held.hold is not None and "is a directory" in held.hold
        path.rmdir()  # the person removes it: written again from the run's log
        begun = shell.begin(2)
        assert begun.item is not None and begun.item.id == "c"
    assert _statuses(work) == {
        "a": "stopped",
        "b": "ready",
        "c": "running" if kind == "folder" else "ready",
    }
    assert path.is_file() and not path.is_symlink()


def test_a_duplicate_id_holds_the_run_and_no_line_is_rewritten(work: Path) -> None:
    log = Log()
    shell = _shell(work, log)
    path = work / ".autopilot" / "tasks.jsonl"
    path.write_text(path.read_text() + '{"id":"a","prompt":"second, keep me"}\n')
    before = path.read_bytes()
    begun = shell.begin(1)
    assert (begun.item, begun.prompt) == (None, None)
    assert begun.hold == (
        "fix .autopilot/tasks.jsonl first: .autopilot/tasks.jsonl: work item id 'a' is used "
        "twice; give each item its own id"
    )
    assert path.read_bytes() == before


def test_a_write_keeps_a_line_added_meanwhile_byte_for_byte_and_sets_a_repeated_id_aside(
    work: Path,
) -> None:
    log = Log()
    shell = _shell(work, log)
    path = work / ".autopilot" / "tasks.jsonl"
    begun = shell.begin(1)
    assert begun.item is not None and begun.item.id == "a"
    # While the agent works, a person appends a repeated id and a new item.
    added = b'{"id":"a",  "prompt":"second, keep me"}\n{"id":"d" ,"prompt":"new"}\n'
    path.write_bytes(path.read_bytes() + added)
    write_report(shell.run_folder, ItemReport("a", ItemDecision.STOP, {}, ()), ts_ms=1, iteration=1)
    shell.end(1, work.parent / "it-1", [], work)
    lines = path.read_bytes().splitlines(keepends=True)
    assert lines[-1] == b'{"id":"d" ,"prompt":"new"}\n'
    assert [json.loads(line)["id"] for line in lines] == ["a", "b", "c", "d"]
    assert json.loads(lines[0])["status"] == "stopped"
    kept = (work.parent / "it-1" / "tasks-rejected.jsonl").read_bytes()
    assert kept == b'{"id":"a",  "prompt":"second, keep me"}\n'


class _Conflicting:
    """A parallel run's siblings whose run branch conflicts with every landing."""

    def holds(self, run_id: str) -> bool:
        return False

    def land(self, item: Any) -> Any:
        from autopilot.loop.claims import Landed

        return Landed(None, ("same.md",), "autopilot/run")


def test_a_merge_conflict_counts_toward_the_attempt_limit(work: Path) -> None:
    """A lane's item reopened by a conflict is an attempt like any other: at the limit
    it is blocked, its reason naming the conflicting files."""
    log = Log()
    shell = _shell(work, log)
    shell.lanes, shell.max_item_attempts = _Conflicting(), 2
    statuses = []
    for iteration in (1, 2):
        begun = shell.begin(iteration)
        assert begun.item is not None and begun.item.id == "a"
        (work / "a.md").write_text("a\n")
        _report(shell, "a", "continue_next", ac1=True)
        ended = shell.end(iteration, work.parent / "run", [], work)
        assert ended is not None
        statuses.append(ended.item.status.value)
    assert statuses == ["reopened", "blocked"]
    lines = (work / ".autopilot" / "tasks.jsonl").read_text().splitlines()
    line = json.loads(lines[0])
    assert (line["id"], line["status"], line["attempt"]) == ("a", "blocked", 2)
    assert line["blocked_reason"].startswith(
        "2 attempts did not complete it (the limit is 2); last verdict fail: merging into the "
        "run branch conflicted in: same.md"
    )
    assert log.types().count("merge_conflict") == 2
