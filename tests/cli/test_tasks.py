"""autopilot tasks and autopilot report through the real command line (in process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autopilot.cli import main as cli_main
from autopilot.config import RunConfig
from autopilot.core.vocabulary import RunStatus
from autopilot.loop.arming import PromptSource, arm_run
from autopilot.loop.backlog import BacklogShell
from autopilot.loop.clock import SystemClock
from autopilot.loop.identity import process_identity
from autopilot.store.backlog import Backlog
from autopilot.store.paths import run_dir, runs_root
from autopilot.store.reports import claim_reports
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore
from autopilot.workspace.worktrees import RunWorktree

TASKS = Path(".autopilot/tasks.jsonl")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    monkeypatch.chdir(path)
    return path


def autopilot(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        cli_main.main(list(args))
    captured = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 0), captured.out, captured.err


def _lines(project: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (project / TASKS).read_text().splitlines()]


def test_add_list_show(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        autopilot(
            capsys,
            "tasks",
            "add",
            "Write the overview",
            "--title",
            "Overview",
            "--criterion",
            "README has an overview",
            "--criterion",
            "overview file exists :: test -f docs/overview.md",
        )[0]
        == 0
    )
    assert (
        autopilot(
            capsys, "tasks", "add", "Describe config", "--id", "config", "--depends-on", "task-1"
        )[0]
        == 0
    )
    lines = _lines(project)
    assert [line["id"] for line in lines] == ["task-1", "config"]
    assert lines[0]["acceptance_criteria"] == [
        "README has an overview",
        {"id": "ac2", "text": "overview file exists", "check": "test -f docs/overview.md"},
    ]
    assert lines[1]["depends_on"] == ["task-1"]
    code, out, _ = autopilot(capsys, "tasks", "list")
    assert code == 0
    assert out.splitlines() == [
        "> task-1           ready                 Overview",
        "  config           blocked-by-dependency Describe config (waits on task-1)",
    ]
    code, out, _ = autopilot(capsys, "tasks", "list", "--json")
    assert [item["id"] for item in json.loads(out)] == ["task-1", "config"]
    code, out, _ = autopilot(capsys, "tasks", "show", "task-1")
    assert "    ac2: overview file exists   [check: test -f docs/overview.md]" in out
    assert "  status:      ready (attempt 0)" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tasks", "add", "x", "--id", "a b"], "--id must be 1-64 letters"),
        (["tasks", "add", "x", "--depends-on", "nope"], "--depends-on names no work item: nope"),
        (["tasks", "add", "  "], "the prompt is empty"),
        (["tasks", "add", "x", "--criterion", " :: true"], "has no text"),
        (["tasks", "add", "x", "--criterion", "text ::"], "has no check after '::'"),
        (["tasks", "add", "x", "--criterion", "text ::  "], "has no check after '::'"),
        (["tasks", "show", "zz"], "no work item 'zz'"),
        (["tasks", "unblock", "zz"], "no work item 'zz'"),
        (["tasks", "block", "zz", "--reason", "  "], "--reason is empty"),
        (["tasks", "import", "missing.md"], "no file missing.md"),
    ],
)
def test_bad_tasks_input_is_one_line_with_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _out, err = autopilot(capsys, *args)
    assert code == 2
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (project / TASKS).exists()


def test_an_id_that_exists_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    autopilot(capsys, "tasks", "add", "x", "--id", "a")
    code, _, err = autopilot(capsys, "tasks", "add", "y", "--id", "a")
    assert code == 2 and "work item 'a' already exists" in err
    assert len(_lines(project)) == 1


def test_block_unblock_reopen(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    autopilot(capsys, "tasks", "add", "x", "--id", "a")
    assert autopilot(capsys, "tasks", "block", "a", "--reason", "waiting for the API key")[0] == 0
    assert _lines(project)[0]["status"] == "blocked"
    assert _lines(project)[0]["blocked_reason"] == "waiting for the API key"
    assert autopilot(capsys, "tasks", "unblock", "a")[0] == 0
    assert _lines(project)[0]["status"] == "ready"
    assert "blocked_reason" not in _lines(project)[0]
    code, _, err = autopilot(capsys, "tasks", "reopen", "a")
    assert code == 2 and "already open (ready)" in err
    autopilot(capsys, "tasks", "edit", "a", "--status", "completed")
    assert autopilot(capsys, "tasks", "reopen", "a")[0] == 0
    line = _lines(project)[0]
    assert (line["status"], line["completion"]["reopen_target"]) == ("reopened", "micro")
    code, _, err = autopilot(capsys, "tasks", "unblock", "a")
    assert code == 2 and "a is reopened, not blocked" in err


def test_edit_with_options(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    autopilot(capsys, "tasks", "add", "x", "--id", "a")
    assert (
        autopilot(
            capsys,
            "tasks",
            "edit",
            "a",
            "--prompt",
            "y",
            "--title",
            "T",
            "--criterion",
            "ok :: true",
        )[0]
        == 0
    )
    line = _lines(project)[0]
    assert (line["prompt"], line["title"]) == ("y", "T")
    assert line["acceptance_criteria"] == [{"id": "ac1", "text": "ok", "check": "true"}]


def test_edit_in_the_editor_refuses_a_broken_item(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    autopilot(capsys, "tasks", "add", "x", "--id", "a")
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nsed -i \'s/"ready"/"finished"/\' "$1"\n')
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    code, _, err = autopilot(capsys, "tasks", "edit", "a")
    assert code == 2 and "not saved: status must be one of" in err
    assert _lines(project)[0]["status"] == "ready"
    editor.write_text('#!/bin/sh\nsed -i \'s/"prompt": "x"/"prompt": "better"/\' "$1"\n')
    assert autopilot(capsys, "tasks", "edit", "a")[0] == 0
    assert _lines(project)[0]["prompt"] == "better"


def test_import_prd_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prd = {
        "project": "Demo",
        "branchName": "ralph/demo",
        "userStories": [
            {
                "id": "US-002",
                "title": "Second",
                "description": "Do two",
                "priority": 2,
                "acceptanceCriteria": ["b works"],
                "passes": False,
                "notes": "",
            },
            {
                "id": "US-001",
                "title": "First",
                "description": "Do one",
                "priority": 1,
                "acceptanceCriteria": ["a works", "typecheck passes"],
                "passes": True,
            },
        ],
    }
    (project / "prd.json").write_text(json.dumps(prd))
    code, out, _ = autopilot(capsys, "tasks", "import", "prd.json")
    assert code == 0
    assert "imported 2 work items from prd.json (1 open, 1 already done)" in out
    # prd.json criteria are words, not commands: the import says the open one
    # completes on the agent's report.
    assert out.splitlines()[-1] == (
        "autopilot: 1 item has criteria with no check: they complete on the agent's "
        "report; add checks with `autopilot tasks edit US-002 --criterion 'TEXT :: CHECK'`"
    )
    lines = _lines(project)
    assert [(x["id"], x["status"], x["title"]) for x in lines] == [
        ("US-001", "completed", "First"),
        ("US-002", "ready", "Second"),
    ]
    assert lines[0]["acceptance_criteria"] == ["a works", "typecheck passes"]
    assert lines[0]["completion"]["verdict"] == "pass"
    assert lines[1]["prompt"] == "Second\n\nDo two"
    # Importing again adds only what is new, and says what it skipped.
    prd["userStories"].append({"id": "US-003", "title": "Third", "description": "Do three"})
    (project / "prd.json").write_text(json.dumps(prd))
    code, out, _ = autopilot(capsys, "tasks", "import", "prd.json")
    assert code == 0
    assert "imported 1 work item from prd.json (1 open, 0 already done; 2 skipped" in out
    assert [x["id"] for x in _lines(project)] == ["US-001", "US-002", "US-003"]


def test_import_markdown_checklist(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "TODO.md").write_text(
        "# Backlog\n\n- [x] Set up the repo\n- [ ] Write the parser\n  * [ ] Nested `$(x)` item\n"
        "Some prose with [ ] brackets.\n"
    )
    code, out, _ = autopilot(capsys, "tasks", "import", "TODO.md")
    assert code == 0
    # The indented line is a criterion of the item above it, not an item.
    lines = _lines(project)
    assert [(x["id"], x["status"], x["prompt"]) for x in lines] == [
        ("task-1", "completed", "Set up the repo"),
        ("task-2", "ready", "Write the parser"),
    ]
    assert lines[1]["acceptance_criteria"] == ["Nested `$(x)` item"]
    assert "autopilot: 1 item has criteria with no check" in out
    # The same checklist, grown by one line, imported again: only that line is added.
    with (project / "TODO.md").open("a") as todo:
        todo.write("- [ ] Write the printer\n")
    code, out, _ = autopilot(capsys, "tasks", "import", "TODO.md")
    assert code == 0 and "imported 1 work item from" in out and "2 skipped" in out
    assert [(x["id"], x["prompt"]) for x in _lines(project)][2:] == [
        ("task-3", "Write the printer")
    ]
    code, out, _ = autopilot(capsys, "tasks", "import", "TODO.md")
    assert code == 0 and "imported 0 work items" in out and "3 skipped" in out
    assert "no check" not in out
    assert len(_lines(project)) == 3
    (project / "empty.md").write_text("nothing here\n")
    code, _, err = autopilot(capsys, "tasks", "import", "empty.md")
    assert code == 2 and "no checklist lines" in err


def test_import_of_a_json_file_that_is_not_json_says_where(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "bad.json").write_text('{"userStories": [\n  {"id": 1,}\n]}\n')
    code, _, err = autopilot(capsys, "tasks", "import", "bad.json")
    assert code == 2
    assert "bad.json: not valid JSON (line 2, column 12: Expecting property name" in err
    (project / "prose.json").write_text("not json at all\n")
    code, _, err = autopilot(capsys, "tasks", "import", "prose.json")
    assert (code, "prose.json: not valid JSON (line 1, column 1: Expecting value)" in err) == (
        2,
        True,
    )


def test_a_missing_prompt_names_the_full_command_for_help(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = autopilot(capsys, "tasks", "add")
    assert code == 2
    assert err.rstrip().endswith("(see autopilot tasks add --help)")


def test_list_warns_about_malformed_lines_and_keeps_them(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".autopilot").mkdir()
    (project / TASKS).write_text('{"id":"a"}\n{oops\n{"id":"b","depends_on":["b"]}\n')
    code, out, err = autopilot(capsys, "tasks", "list")
    assert code == 0
    assert "a" in out
    assert err.splitlines()[0].startswith(
        "autopilot: warning: .autopilot/tasks.jsonl line 2: not valid JSON"
    )
    assert "dependency cycle: b -> b" in err
    autopilot(capsys, "tasks", "block", "a", "--reason", "r")
    assert (project / TASKS).read_text().splitlines()[1] == "{oops"


# -- autopilot report ------------------------------------------------------------------


@pytest.fixture
def run(project: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (project / ".autopilot").mkdir()
    items = [
        {
            "id": "unit-1",
            "status": "running",
            "prompt": "one",
            "acceptance_criteria": ["docs", {"id": "tests", "text": "t", "check": "true"}],
        },
        {"id": "unit-2", "status": "ready", "prompt": "two"},
    ]
    (project / TASKS).write_text("".join(json.dumps(i) + "\n" for i in items))
    run_id = arm_run(
        runs_root(), RunConfig(agent="demo"), PromptSource(text="x"), project, SystemClock()
    )
    monkeypatch.setenv("AUTOPILOT_RUN_ID", run_id)
    monkeypatch.setenv("AUTOPILOT_ITERATION", "4")
    return run_id


def test_report_is_recorded_for_the_driver(run: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = autopilot(
        capsys,
        "report",
        "continue_next",
        "--item",
        "unit-1",
        "--criterion",
        "ac1=pass",
        "--criterion",
        "tests=PASS",
        "--evidence",
        "wrote docs/x.md",
    )
    assert (code, err) == (0, "")
    assert "recorded continue_next for unit-1" in out
    claimed = claim_reports(run_dir(runs_root(), run))
    assert len(claimed) == 1 and claimed[0].report is not None
    assert claimed[0].report.criteria == {"ac1": True, "tests": True}
    assert claimed[0].report.evidence == ("wrote docs/x.md",)
    assert json.loads(claimed[0].path.read_text())["iteration"] == 4
    assert claim_reports(run_dir(runs_root(), run)) == []


def test_evidence_not_utf8_is_not_called_cut(run: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = autopilot(
        capsys, "report", "retry_same_unit", "--item", "unit-1", "--evidence", "bad \udcff byte"
    )
    assert (code, err) == (0, "")
    assert "recorded retry_same_unit for unit-1:" in out and "cut" not in out


def test_long_evidence_is_cut_where_it_enters(run: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = autopilot(
        capsys, "report", "retry_same_unit", "--item", "unit-1", "--evidence", "y" * 13_000
    )
    assert (code, err) == (0, "")
    assert "(its --evidence was cut to fit the item's record)" in out
    claimed = claim_reports(run_dir(runs_root(), run))
    assert claimed[0].report is not None
    (evidence,) = claimed[0].report.evidence
    assert evidence.startswith("yyy") and evidence.endswith(" bytes]") and "… [cut: " in evidence
    assert len(evidence.encode()) <= 2048


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["finish", "--item", "unit-1"], "DECISION must be one of continue_next, retry_same_unit"),
        (["stop", "--item", "unit-9"], "no work item 'unit-9'"),
        (["stop", "--item", "unit-2"], "work item 'unit-2' is ready, not running"),
        (
            [
                "continue_next",
                "--item",
                "unit-1",
                "--criterion",
                "ac1=pass",
                "--criterion",
                "ac7=pass",
                "--criterion",
                "tests=pass",
            ],
            "criterion 'ac7' is not one of",
        ),
        (
            ["continue_next", "--item", "unit-1", "--criterion", "ac1=pass"],
            "add --criterion tests=pass once each one holds",
        ),
        (["continue_next", "--item", "unit-1", "--criterion", "ac1"], "--criterion takes ID=pass"),
        (["reopen_micro", "--item", "unit-1"], "reopen_micro needs --evidence TEXT"),
    ],
)
def test_a_bad_report_says_how_to_fix_it(
    run: str, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = autopilot(capsys, "report", *args)
    assert code == 2
    assert len(err.splitlines()) == 1 and message in err, err
    assert claim_reports(run_dir(runs_root(), run)) == []


def test_report_outside_any_run(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = autopilot(capsys, "report", "stop", "--item", "a")
    assert code == 2
    assert "autopilot report is for an agent inside a run: $AUTOPILOT_RUN_ID is not set" in err


def test_report_to_an_ended_run(run: str, capsys: pytest.CaptureFixture[str]) -> None:
    def end(state: RunState) -> None:
        state.terminated, state.termination_reason = True, "user_stopped"

    StateStore(run_dir(runs_root(), run) / "state.json").update(end)
    code, _, err = autopilot(capsys, "report", "stop", "--item", "unit-1")
    assert code == 2 and "has ended (user_stopped)" in err


# -- autopilot answer / approve ----------------------------------------------------------


def test_answer_and_approve_a_gate(run: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = StateStore(run_dir(runs_root(), run) / "state.json")
    code, _, err = autopilot(capsys, "answer", "sqlite")
    assert code == 2 and f"run {run} is not waiting for an answer" in err
    store.update(lambda s: setattr(s, "gate", "Which database?"))
    code, out, _ = autopilot(capsys, "answer", run, "sqlite, please")
    assert code == 0 and "answered 'sqlite, please'" in out and "Which database" not in out
    assert store.read().gate_answer == "sqlite, please"
    code, _, err = autopilot(capsys, "approve")  # answered already: the first answer holds
    assert code == 2 and "'Which database?' was already answered ('sqlite, please')" in err
    assert store.read().gate_answer == "sqlite, please"
    store.update(lambda s: setattr(s, "gate_answer", None))
    code, out, _ = autopilot(capsys, "approve")
    assert code == 0 and store.read().gate_answer == "approved"
    code, _, err = autopilot(capsys, "answer", "   ")
    assert code == 2 and "the answer is empty" in err
    code, _, err = autopilot(capsys, "answer", run, "a", "b")
    assert code == 2 and "give [RUN] TEXT" in err


def test_an_answer_to_a_run_without_a_daemon_says_how_it_goes_on(
    run: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = StateStore(run_dir(runs_root(), run) / "state.json")
    store.update(lambda s: setattr(s, "gate", "Which database?"))
    code, out, _ = autopilot(capsys, "answer", run, "sqlite")
    assert code == 0
    assert out.strip() == (
        f"autopilot: {run}: answered 'sqlite'; no daemon is running it: "
        f"autopilot start {run} goes on with the answer"
    )
    store.update(lambda s: setattr(s, "gate_answer", None))
    (project / ".autopilot").mkdir(exist_ok=True)
    (project / ".autopilot" / "OFF").write_text("")
    code, out, _ = autopilot(capsys, "approve", run)
    assert code == 0
    assert out.strip() == (
        f"autopilot: {run}: approved 'Which database?'; no daemon is running it and "
        f"autopilot is OFF in its project: autopilot on, then autopilot start {run} goes "
        "on with the answer"
    )


def test_of_two_answers_at_once_only_the_first_is_taken(run: str, project: Path) -> None:
    store = StateStore(run_dir(runs_root(), run) / "state.json")
    store.update(lambda s: setattr(s, "gate", "Which database?"))
    answers = [f"answer {n}" for n in range(4)]
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "autopilot", "answer", run, text],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for text in answers
    ]
    done = []
    for process in started:
        out, err = process.communicate(timeout=60)
        done.append((process.returncode, out, err))
    taken = [answers[i] for i, (code, _, _) in enumerate(done) if code == 0]
    assert len(taken) == 1 and store.read().gate_answer == taken[0]
    for code, out, err in done:
        if code != 0:
            assert code == 2 and "already answered" in err and len(err.strip().splitlines()) == 1
            assert "the run goes on" not in out


def test_status_shows_the_question(run: str, capsys: pytest.CaptureFixture[str]) -> None:
    StateStore(run_dir(runs_root(), run) / "state.json").update(
        lambda s: (
            setattr(s, "gate", "Which database?"),
            setattr(s, "status", RunStatus.AWAITING_USER),
        )
    )
    code, out, _ = autopilot(capsys, "status", run)
    assert code == 0
    assert "awaiting_user — waits for your answer: Which database? (autopilot answer TEXT)" in out


def test_a_duplicate_id_is_never_next_and_a_backlog_run_refuses_to_start(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".autopilot").mkdir()
    written = b'{"id":"e","prompt":"first"}\n{"id":"e","prompt":"second, keep me"}\n'
    (project / TASKS).write_bytes(written)

    code, out, err = autopilot(capsys, "tasks", "list")
    assert code == 0
    assert [line[0] for line in out.splitlines()] == [" ", " "]  # no line marked next
    assert "'e' is used twice" in err

    code, out, err = autopilot(
        capsys,
        "run",
        "--backlog",
        "--agent",
        "command",
        "--plain",
        "--max-iterations",
        "1",
        "--",
        "/bin/true",
    )
    assert code == 2
    assert err.strip().splitlines() == [
        "autopilot: error: fix it first: .autopilot/tasks.jsonl: work item id 'e' is used twice; "
        "give each item its own id"
    ]
    assert (project / TASKS).read_bytes() == written
    assert not (project.parent / "runs").exists() or not [
        p for p in (project.parent / "runs").iterdir() if p.name.startswith("project-")
    ]


def _armed_backlog_of_one(project: Path) -> str:
    """Arm a backlog run over one ready item ``a``; returns its id."""
    (project / ".autopilot").mkdir()
    (project / TASKS).write_text(json.dumps({"id": "a", "status": "ready", "prompt": "p"}) + "\n")
    return arm_run(
        runs_root(),
        RunConfig(agent="demo"),
        PromptSource(text="x"),
        project,
        SystemClock(),
        mode="backlog",
    )


def test_a_work_item_change_during_an_iteration_is_refused_not_undone_later(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = _armed_backlog_of_one(project)
    store = StateStore(run_dir(runs_root(), run_id) / "state.json")
    me = process_identity(os.getpid())
    assert me is not None

    def in_iteration(state: RunState) -> None:  # this process stands for its driver
        state.iteration, state.iteration_open = 3, True
        state.pid, state.pid_start_time, state.pid_command = os.getpid(), me.start_time, me.command

    store.update(in_iteration)
    before = (project / TASKS).read_text()
    code, out, err = autopilot(capsys, "tasks", "block", "a", "--reason", "later")
    assert code == 2 and out == ""
    assert f"run {run_id} is in iteration 3" in err and f"autopilot pause {run_id}" in err
    assert (project / TASKS).read_text() == before
    store.update(lambda s: setattr(s, "iteration_open", False))  # between iterations
    assert autopilot(capsys, "tasks", "block", "a", "--reason", "later")[0] == 0
    assert _lines(project)[0]["status"] == "blocked"


def test_a_change_is_refused_while_a_lane_or_worktree_run_of_the_checkout_works(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Such a run works in a worktree of its own, but on the checkout's tasks.jsonl."""
    run_id = _armed_backlog_of_one(project)
    store = StateStore(run_dir(runs_root(), run_id) / "state.json")
    me = process_identity(os.getpid())
    assert me is not None
    tree = tmp_path / "worktrees" / run_id
    tree.mkdir(parents=True)
    place = RunWorktree(tree, f"autopilot/{run_id}", "0" * 40, project)

    def in_iteration(state: RunState) -> None:  # this process stands for its driver
        lane = {"parent": "repo-parallel", "number": 1}
        state.cwd = str(tree)
        state.extra = {**state.extra, "worktree": place.to_json(), "lane": lane}
        state.iteration, state.iteration_open = 2, True
        state.pid, state.pid_start_time, state.pid_command = os.getpid(), me.start_time, me.command

    store.update(in_iteration)
    before = (project / TASKS).read_text()
    code, _, err = autopilot(capsys, "tasks", "block", "a", "--reason", "later")
    assert code == 2 and f"run {run_id} is in iteration 2" in err
    assert "autopilot pause repo-parallel holds the run" in err  # the lane's parallel run
    assert (project / TASKS).read_text() == before


def test_a_change_is_refused_from_the_moment_the_run_took_its_copy_of_the_items(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run marks its turn under the backlog's lock as it takes its copy, before the
    agent starts and before state.json says the iteration is open."""
    run_id = _armed_backlog_of_one(project)
    folder = run_dir(runs_root(), run_id)
    store = StateStore(folder / "state.json")
    me = process_identity(os.getpid())
    assert me is not None

    def driver(state: RunState) -> None:  # this process stands for its driver
        state.pid, state.pid_start_time, state.pid_command = os.getpid(), me.start_time, me.command

    store.update(driver)
    shell = BacklogShell(Backlog(project, runs_root() / ".locks"), run_id, folder, _no_event)
    assert shell.begin(4).item is not None
    assert not store.read().iteration_open
    before = (project / TASKS).read_text()
    code, out, err = autopilot(capsys, "tasks", "edit", "a", "--prompt", "q")
    assert code == 2 and out == ""
    assert f"run {run_id} is in iteration 4, and a work item changed now" in err
    assert (project / TASKS).read_text() == before
    shell.end(4, folder / "iter-4", [], project)  # no report: a stays running
    assert autopilot(capsys, "tasks", "edit", "a", "--prompt", "q")[0] == 0
    assert _lines(project)[0]["prompt"] == "q"


def _no_event(event_type: str, **fields: Any) -> None:
    return None


def test_edit_with_no_options_and_no_terminal_says_which_options_edit(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    autopilot(capsys, "tasks", "add", "x", "--id", "a")
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    code, _, err = autopilot(capsys, "tasks", "edit", "a")
    assert code == 2
    assert err.strip().splitlines() == [
        "autopilot: error: no terminal to edit the item in (and no $EDITOR): change it with "
        "--prompt TEXT, --title TEXT, --criterion TEXT[ :: CHECK], --surface PATH, "
        "--depends-on ID or --status STATUS"
    ]
    assert _lines(project)[0]["prompt"] == "x"


def test_an_editor_that_fails_is_one_line_naming_the_options(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    autopilot(capsys, "tasks", "add", "x", "--id", "a")
    monkeypatch.setenv("EDITOR", str(tmp_path / "no-such-editor"))
    code, _, err = autopilot(capsys, "tasks", "edit", "a")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "change the item with --prompt TEXT" in err


def test_max_item_attempts_comes_from_a_flag_or_the_config_and_survives_state_json(
    tmp_path: Path,
) -> None:
    from autopilot.config_sources import build_config

    (tmp_path / ".autopilot").mkdir()
    assert build_config({}, project=tmp_path, environ={}).max_item_attempts == 3
    (tmp_path / ".autopilot" / "config.toml").write_text("max-item-attempts = 5\n")
    assert build_config({}, project=tmp_path, environ={}).max_item_attempts == 5
    flags = {"max-item-attempts": "0"}
    config = build_config(flags, project=tmp_path, environ={})
    assert config.max_item_attempts == 0
    assert RunConfig.from_json(config.to_json()).max_item_attempts == 0


def test_unblock_gives_an_item_its_attempts_again(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = {"id": "a", "prompt": "x", "status": "blocked", "attempt": 3, "blocked_reason": "r"}
    (project / TASKS).parent.mkdir(parents=True, exist_ok=True)
    (project / TASKS).write_text(json.dumps(line) + "\n")
    assert autopilot(capsys, "tasks", "unblock", "a")[0] == 0
    unblocked = _lines(project)[0]
    assert (unblocked["status"], unblocked["attempt"], unblocked["attempts_from"]) == (
        "ready",
        3,
        3,
    )


def test_an_answer_names_the_items_that_get_more_attempts(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".autopilot").mkdir()
    spent = "3 attempts did not complete it (the limit is 3); autopilot tasks unblock {} gives it 3 more"
    items = [
        {"id": "a", "status": "blocked", "attempt": 3, "blocked_reason": spent.format("a")},
        {"id": "b", "status": "blocked", "blocked_reason": "waiting for the vendor"},
        {"id": "c", "status": "blocked", "attempt": 3, "blocked_reason": spent.format("c")},
    ]
    (project / TASKS).write_text("".join(json.dumps(i) + "\n" for i in items))
    run_id = arm_run(
        runs_root(),
        RunConfig(agent="demo"),
        PromptSource(text="x"),
        project,
        SystemClock(),
        mode="backlog",
    )
    store = StateStore(run_dir(runs_root(), run_id) / "state.json")
    store.update(lambda s: setattr(s, "gate", "no work item can start: a is blocked: …"))
    code, out, _ = autopilot(capsys, "answer", run_id, "the API is back")
    assert code == 0 and "(a, c get more attempts); no daemon is running it" in out


# -- tasks edit --surface/--depends-on, tasks remove, the editor without the lock ---------


def test_edit_replaces_surfaces_and_dependencies_and_checks_them(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for item_id in ("a", "b", "c"):
        autopilot(capsys, "tasks", "add", item_id, "--id", item_id)
    code, out, _ = autopilot(
        capsys,
        "tasks",
        "edit",
        "c",
        "--surface",
        "src/",
        "--surface",
        "docs/*.md",
        "--depends-on",
        "a",
    )
    assert code == 0 and out.strip() == "autopilot: c changed"
    line = _lines(project)[2]
    assert (line["allowed_surface"], line["depends_on"]) == (["src/", "docs/*.md"], ["a"])
    code, out, _ = autopilot(capsys, "tasks", "edit", "c", "--depends-on", "b")
    assert code == 0 and _lines(project)[2]["depends_on"] == ["b"]
    code, out, _ = autopilot(capsys, "tasks", "edit", "c", "--depends-on", "b")
    assert code == 0 and out.strip() == "autopilot: c unchanged"
    autopilot(capsys, "tasks", "edit", "a", "--depends-on", "c")
    before = (project / TASKS).read_bytes()
    for args, message in [
        (["b", "--depends-on", "a"], "not changed: b would close a dependency cycle: "),
        (["b", "--depends-on", "nope"], "--depends-on names no other work item: nope"),
        (["b", "--depends-on", "b"], "--depends-on names no other work item: b"),
        (["b", "--surface", "/etc/passwd"], "'/etc/passwd' is not relative to the project"),
        (["b", "--surface", "src/../../x"], "'src/../../x' leaves the project (..)"),
    ]:
        code, _, err = autopilot(capsys, "tasks", "edit", *args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert (project / TASKS).read_bytes() == before
    code, _, _ = autopilot(capsys, "tasks", "edit", "c", "--surface", "", "--depends-on", "")
    assert code == 0 and (
        _lines(project)[2]["allowed_surface"],
        _lines(project)[2]["depends_on"],
    ) == ([], [])


def test_remove_refuses_a_running_item_and_one_others_depend_on_unless_forced(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for item_id in ("a", "b", "c"):
        autopilot(capsys, "tasks", "add", item_id, "--id", item_id)
    autopilot(capsys, "tasks", "edit", "c", "--depends-on", "a", "--depends-on", "b")
    autopilot(capsys, "tasks", "edit", "b", "--status", "running")
    arm_run(  # a backlog run holds b (without one, b was interrupted: removable)
        runs_root(),
        RunConfig(agent="demo"),
        PromptSource(text="x"),
        project,
        SystemClock(),
        mode="backlog",
    )
    code, _, err = autopilot(capsys, "tasks", "remove", "a")
    assert code == 2 and "c depends on a; change that first" in err
    code, _, err = autopilot(capsys, "tasks", "remove", "b")
    assert code == 2 and "b is running; stop its run first, or add --force" in err
    code, _, err = autopilot(capsys, "tasks", "remove", "zz")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no work item 'zz'" in err
    assert [line["id"] for line in _lines(project)] == ["a", "b", "c"]
    code, out, _ = autopilot(capsys, "tasks", "remove", "a", "--force")
    assert code == 0 and out.strip() == "autopilot: a removed (c no longer depends on it)"
    assert [(x["id"], x["depends_on"]) for x in _lines(project)] == [("b", []), ("c", ["b"])]


def test_the_editor_runs_without_the_backlog_lock_and_a_change_meanwhile_is_not_overwritten(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from autopilot.core.digest import sha256_hex

    autopilot(capsys, "tasks", "add", "x", "--id", "a")
    autopilot(capsys, "tasks", "add", "y", "--id", "b")
    lock = runs_root() / ".locks" / f"tasks-{sha256_hex(str(project.resolve()).encode())[:16]}.lock"
    assert lock.exists()
    seen = tmp_path / "seen"
    editor = tmp_path / "editor.sh"
    editor.write_text(
        "#!/bin/sh\n"
        f"flock -n {lock} true && echo free > {seen} || echo held > {seen}\n"
        'sed -i \'s/"prompt": "x"/"prompt": "better"/\' "$1"\n'
    )
    editor.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(editor))
    code, out, _ = autopilot(capsys, "tasks", "edit", "a")
    assert code == 0 and out.strip() == "autopilot: a changed"
    assert seen.read_text() == "free\n" and _lines(project)[0]["prompt"] == "better"
    # Someone changes the item while the editor is open: the edit is not saved.
    editor.write_text(
        "#!/bin/sh\n"
        f'sed -i \'s/"better"/"theirs"/\' {project / TASKS}\n'
        'sed -i \'s/"prompt": "better"/"prompt": "mine"/\' "$1"\n'
    )
    code, _, err = autopilot(capsys, "tasks", "edit", "a")
    assert code == 2 and "not saved: a changed in the file while it was being edited" in err
    assert _lines(project)[0]["prompt"] == "theirs"
    editor.write_text("#!/bin/sh\ntrue\n")
    code, out, _ = autopilot(capsys, "tasks", "edit", "a")
    assert code == 0 and out.strip() == "autopilot: a unchanged"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["x", "--surface", "/etc/passwd"], "allowed_surface: '/etc/passwd' is not relative"),
        (["x", "--surface", "../x"], "allowed_surface: '../x' leaves the project (..)"),
        (["x", "--surface", "~/x"], "allowed_surface: '~/x' is not relative"),
        (["fix \udcff it"], "prompt has a byte that is not UTF-8 (0xFF) at character 5"),
        (["x", "--title", "\udcff"], "title has a byte that is not UTF-8 (0xFF)"),
    ],
)
def test_add_refuses_a_surface_outside_the_project_and_text_that_is_not_unicode(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = autopilot(capsys, "tasks", "add", *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not (project / TASKS).exists()


def test_import_refuses_a_lone_surrogate(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "prd.json").write_text('{"userStories": [{"id": "s1", "title": "fix \\ud800"}]}')
    code, _, err = autopilot(capsys, "tasks", "import", "prd.json")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "work item 's1': prompt has a lone surrogate (U+D800)" in err
    assert not (project / TASKS).exists()


def test_a_subfolder_means_its_project_for_tasks_and_status(
    run: str, project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = project / "src" / "deep"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    code, out, _ = autopilot(capsys, "tasks", "list")
    assert code == 0 and "unit-1" in out and "unit-2" in out
    assert autopilot(capsys, "tasks", "add", "Three", "--id", "unit-3")[0] == 0
    assert [line["id"] for line in _lines(project)] == ["unit-1", "unit-2", "unit-3"]
    assert not (sub / ".autopilot").exists() and not (project / "src" / ".autopilot").exists()
    code, out, err = autopilot(capsys, "status")
    assert code == 0 and run in out, err


def test_in_a_repository_without_autopilot_files_a_subfolder_means_the_top(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".git").mkdir()
    (project / "lib").mkdir()
    monkeypatch.chdir(project / "lib")
    assert autopilot(capsys, "tasks", "add", "One")[0] == 0
    assert [line["id"] for line in _lines(project)] == ["task-1"]
    assert not (project / "lib" / ".autopilot").exists()


def test_unblock_says_a_run_waiting_at_a_backlog_gate_goes_on(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".autopilot").mkdir()
    item = {"id": "alpha", "prompt": "a", "status": "blocked", "blocked_reason": "stuck"}
    (project / TASKS).write_text(json.dumps(item) + "\n")
    run_id = arm_run(
        runs_root(),
        RunConfig(agent="demo"),
        PromptSource(text="x"),
        project,
        SystemClock(),
        mode="backlog",
    )
    StateStore(run_dir(runs_root(), run_id) / "state.json").update(
        lambda s: (
            setattr(s, "gate", "no work item can start: alpha is blocked: stuck"),
            setattr(s, "status", RunStatus.AWAITING_USER),
        )
    )
    code, out, _ = autopilot(capsys, "tasks", "unblock", "alpha")
    assert code == 0 and f"run {run_id}, waiting at its gate, goes on" in out
    StateStore(run_dir(runs_root(), run_id) / "state.json").update(
        lambda s: setattr(s, "gate", "Which format?")
    )
    assert autopilot(capsys, "tasks", "block", "alpha", "--reason", "x")[0] == 0
    code, out, _ = autopilot(capsys, "tasks", "reopen", "alpha")
    assert code == 0 and "goes on" not in out


def test_a_running_item_no_run_holds_is_interrupted_and_may_be_reopened_or_removed(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `stop --now` leaves: the item `running` in the file, and no run on it."""
    (project / ".autopilot").mkdir()
    items = [
        {"id": "one", "prompt": "1", "status": "running", "attempt": 1},
        {"id": "two", "prompt": "2", "status": "running", "attempt": 1},
    ]
    (project / TASKS).write_text("".join(json.dumps(i) + "\n" for i in items))
    code, out, _ = autopilot(capsys, "tasks", "list")
    assert code == 0 and "interrupted" in out and "the next run resumes it" in out
    assert "interrupted" in autopilot(capsys, "tasks", "show", "one")[1]
    assert autopilot(capsys, "tasks", "reopen", "one")[0] == 0
    assert autopilot(capsys, "tasks", "remove", "two")[0] == 0
    assert [(line["id"], line["status"]) for line in _lines(project)] == [("one", "reopened")]


def test_a_running_item_a_backlog_run_holds_stays_running(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / ".autopilot").mkdir()
    item = {"id": "one", "prompt": "1", "status": "running", "attempt": 1}
    (project / TASKS).write_text(json.dumps(item) + "\n")
    arm_run(
        runs_root(),
        RunConfig(agent="demo"),
        PromptSource(text="x"),
        project,
        SystemClock(),
        mode="backlog",
    )
    code, out, _ = autopilot(capsys, "tasks", "list")
    assert code == 0 and "interrupted" not in out and "running" in out
    code, _, err = autopilot(capsys, "tasks", "remove", "one")
    assert code != 0 and "stop its run first" in err
    code, _, err = autopilot(capsys, "tasks", "reopen", "one")
    assert code != 0 and "already open (running)" in err


def test_import_refuses_a_dependency_cycle_and_a_repeated_story_id(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stories = [
        {"id": "A", "title": "a"},
        {"id": "B", "title": "b", "dependsOn": ["C"]},
        {"id": "C", "title": "c", "dependsOn": ["B"]},
    ]
    (project / "prd.json").write_text(json.dumps({"userStories": stories}))
    code, _, err = autopilot(capsys, "tasks", "import", "prd.json")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "dependency cycle: B -> C -> B" in err and "nothing was imported" in err
    assert not (project / TASKS).exists() or _lines(project) == []
    twice = [{"id": "A", "title": "a"}, {"id": "A", "title": "other"}]
    (project / "prd.json").write_text(json.dumps({"userStories": twice}))
    code, _, err = autopilot(capsys, "tasks", "import", "prd.json")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "story id 'A' is used by more than one story" in err
    assert not (project / TASKS).exists() or _lines(project) == []


def test_an_answer_is_confirmed_shortened_on_one_line(
    run: str, capsys: pytest.CaptureFixture[str]
) -> None:
    StateStore(run_dir(runs_root(), run) / "state.json").update(
        lambda s: setattr(s, "gate", "Which database?")
    )
    code, out, _ = autopilot(capsys, "answer", run, "use sqlite\n" + "because " * 20)
    assert code == 0 and len(out.strip().splitlines()) == 1
    assert "answered 'use sqlite because because" in out and "…'" in out
