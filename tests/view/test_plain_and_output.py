"""``watch --plain`` (one line per event until the terminal event) and the agent-output tail."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autopilot.view.follow import follow_plain
from autopilot.view.output import LineKind, OutputFollower, OutputRenderer, iteration_folder
from autopilot.view.plain import format_event
from tests.conftest import run_cli
from tests.view.runfiles import (
    RUN_ID,
    EventWriter,
    agent_output,
    append_lines,
    base_state,
    running_log,
    write_run,
)


def _line(event: dict[str, object]) -> str:
    return json.dumps(event, separators=(",", ":")) + "\n"


def test_plain_prints_a_finished_run_and_exits(tmp_path: Path) -> None:
    """Every event once, formatted as ``format_event``; returns at the terminal event."""
    log = running_log()
    log.add("complete", reason="completion_promise")
    log.add("warning", note="written after the end")
    folder = write_run(tmp_path, base_state(terminated=True), log.events)
    lines: list[str] = []
    assert follow_plain(folder, lines.append) == 0
    assert lines == [format_event(e) for e in log.events[:-1]]


def test_plain_follows_until_the_terminal_event(tmp_path: Path) -> None:
    """Events appended later (one torn across two writes) are printed as they arrive."""
    log = running_log()
    folder = write_run(tmp_path, base_state(iter=3), log.events)
    lines: list[str] = []
    extra = [log.add("iteration_end", iteration=3, outcome="ok"), log.add("abort", reason="x")]

    def writer() -> None:
        time.sleep(0.3)
        data = _line(extra[0]) + _line(extra[1])
        append_lines(folder / "events.jsonl", data[:25])
        time.sleep(0.3)
        append_lines(folder / "events.jsonl", data[25:])

    thread = threading.Thread(target=writer)
    thread.start()
    started = time.monotonic()
    code = follow_plain(folder, lines.append, liveness=lambda *_: True, quiet_seconds=30)
    thread.join()
    assert code == 0
    assert time.monotonic() - started < 10, "must not wait for the quiet period"
    assert lines[-2:] == [format_event(extra[0]), format_event(extra[1])]
    assert len(lines) == len(log.events)


def test_plain_gives_up_when_the_driver_is_gone(tmp_path: Path) -> None:
    """A run left without a driver and without a terminal event ends the follow (exit 1)."""
    state = base_state(iter=3, pid=999_999_999, host=socket.gethostname())
    folder = write_run(tmp_path, state, running_log().events)
    notes: list[str] = []
    code = follow_plain(folder, lambda _: None, quiet_seconds=0.3, warn=notes.append)
    assert code == 1
    assert "driver is gone" in notes[0] and f"autopilot start {folder.name}" in notes[0]


def _log_driven_by(pid: int) -> list[dict[str, object]]:
    log = EventWriter()
    log.add("armed", label="demo", maxIterations=10, agent="claude")
    log.add("driver_start", pid=pid, agent="claude")
    log.add("iteration_start", iteration=1)
    return log.events


@pytest.mark.parametrize("content", ["{not json", "", None])
def test_plain_ends_when_state_is_unreadable_and_no_driver_runs(
    tmp_path: Path, content: str | None
) -> None:
    """state.json corrupt, empty or missing, no terminal event, no driver: exit 1, said why."""
    folder = write_run(tmp_path, base_state(iter=1), _log_driven_by(999_999_999))
    if content is None:
        (folder / "state.json").unlink()
    else:
        (folder / "state.json").write_text(content)
    notes: list[str] = []
    code = follow_plain(folder, lambda _: None, quiet_seconds=0.2, warn=notes.append)
    assert code == 1
    assert notes == [
        f"autopilot: run {folder.name}: state.json cannot be read and no driver is running "
        f"it; see autopilot status {folder.name}"
    ]


def test_plain_keeps_following_an_unreadable_run_whose_driver_lives(tmp_path: Path) -> None:
    """The log's driver is this very process: the follow goes on until told to stop."""
    folder = write_run(tmp_path, base_state(iter=1), _log_driven_by(os.getpid()))
    (folder / "state.json").write_text("{not json")
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    notes: list[str] = []
    assert (
        follow_plain(folder, lambda _: None, stop=stop, quiet_seconds=0.2, warn=notes.append) == 0
    )
    assert notes == []


def test_plain_stops_when_asked(tmp_path: Path) -> None:
    """Setting ``stop`` ends following early."""
    folder = write_run(tmp_path, base_state(iter=3), running_log().events)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    assert follow_plain(folder, lambda _: None, stop=stop, liveness=lambda *_: True) == 0


def test_watch_without_a_terminal_is_plain(tmp_path: Path) -> None:
    """``autopilot watch RUN`` with stdout not a TTY prints plain lines and exits 0."""
    log = running_log()
    log.add("complete", reason="completion_promise")
    folder = write_run(tmp_path / "runs", base_state(terminated=True), log.events)
    for args in (["watch", folder.name], ["watch", "--plain", folder.name[:8]]):
        done = run_cli(args, cwd=tmp_path, timeout=60)
        assert done.returncode == 0, done.stderr
        shown = done.stdout.splitlines()
        assert len(shown) == len(log.events)
        assert shown[-1].split(" ", 1)[1] == "complete reason=completion_promise"


def test_watch_unknown_run_is_a_usage_error(tmp_path: Path) -> None:
    """A RUN that matches nothing: one line, exit 2, no traceback."""
    (tmp_path / "runs").mkdir()
    done = run_cli(["watch", "--plain", "nope-123"], cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("autopilot: error: ") and "Traceback" not in done.stderr


def test_watch_plain_in_a_pipe_follows_a_live_run(tmp_path: Path) -> None:
    """The CLI follows a run that ends while it watches."""
    log = EventWriter()
    log.add("armed", label="demo")
    folder = write_run(tmp_path / "runs", base_state(pid=None), log.events)
    env = dict(os.environ, AUTOPILOT_RUNS_DIR=str(tmp_path / "runs"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "autopilot", "watch", folder.name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(1.0)
    append_lines(folder / "events.jsonl", _line(log.add("abort", reason="user_stopped")))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.splitlines()[-1].endswith("abort reason=user_stopped")


def test_output_is_rendered_for_people() -> None:
    """Assistant text, tool calls with arguments, shortened results; raw when unparsable."""
    renderer = OutputRenderer("claude")
    lines = [line for raw in agent_output() for line in renderer.feed(raw)]
    kinds = [line.kind for line in lines]
    assert kinds == [
        LineKind.TEXT,
        LineKind.TOOL,
        LineKind.RESULT,
        LineKind.TOOL,
        LineKind.RESULT,
        LineKind.TEXT,
        LineKind.RAW,
    ]
    assert lines[1].tool == "Read" and lines[1].text == "/work/project/src/login.py"
    assert len(lines[2].text) <= 160 and lines[2].text.endswith("…")
    assert lines[3].text == "pytest -q tests/test_login.py"
    assert lines[-1].text == "this line is not JSON"


def test_output_of_unknown_or_plain_agents() -> None:
    """An unknown agent's lines are shown raw; a command agent's as text."""
    assert OutputRenderer("nonesuch").feed('{"a": 1}')[0].kind is LineKind.RAW
    assert OutputRenderer("command").feed("hello")[0].kind is LineKind.TEXT
    assert OutputRenderer(None).feed("   ") == []


def test_output_follower_picks_the_latest_attempt(tmp_path: Path) -> None:
    """A retried iteration (``iter-0003.2``) is the one followed; a torn line waits."""
    folder = write_run(tmp_path, base_state(), None, output={3: agent_output()[:2]})
    retry = folder / "iter-0003.2"
    retry.mkdir()
    (retry / "stdout.log").write_text(agent_output()[4] + "\n" + agent_output()[6][:30])
    assert iteration_folder(folder, 3) == retry
    assert iteration_folder(folder, 9) is None
    follower = OutputFollower(folder, base_state())
    assert follower.attach(3) and not follower.attach(3)
    assert [line.tool for line in follower.read_new()] == ["Bash"]
    append_lines(retry / "stdout.log", agent_output()[6][30:] + "\n")
    assert [line.kind for line in follower.read_new()] == [LineKind.TEXT]


def test_replay_streams_every_event_and_the_final_picture(tmp_path: Path) -> None:
    """``replay`` prints each event then a summary; ``--json`` is the folded snapshot."""
    from autopilot.store.events import read_events
    from autopilot.store.fold import fold

    log = running_log()
    log.add("abort", reason="max_iterations", iteration=3)
    folder = write_run(tmp_path / "runs", base_state(terminated=True), log.events)
    append_lines(folder / "events.jsonl", '{"type": "pause", "ts": 1')
    done = run_cli(["replay", folder.name], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:-1] == [format_event(e) for e in log.events]
    assert lines[-1] == (
        f"-- {folder.name}: budget reached (max_iterations), iteration 3, tokens 5500/480, cost $0.0250"
    )
    as_json = json.loads(run_cli(["replay", "--json", folder.name], cwd=tmp_path).stdout)
    assert as_json == fold(read_events(folder / "events.jsonl")).to_dict()


def test_replay_of_a_run_waiting_for_an_answer_says_so(tmp_path: Path) -> None:
    """A ``gate`` not yet answered is the run's state, as ``status`` says it; RUN
    omitted is this project's run."""
    project = tmp_path / "project"
    project.mkdir()
    log = running_log()
    log.add("gate", iteration=3, itemId="task-4", question="which date format?")
    state = base_state(cwd=str(project), status="awaiting_user", gate="which date format?")
    write_run(tmp_path / "runs", state, log.events)
    done = run_cli(["replay"], cwd=project, env={"AUTOPILOT_RUNS_DIR": str(tmp_path / "runs")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(
        f"-- {RUN_ID}: awaiting_user — waits for your answer: which date format?, iteration 3"
    )
    log.add("message_queued", messageId="m1", kind="answer", source="user")
    log.add("iteration_start", iteration=4)
    write_run(tmp_path / "again", state, log.events)
    done = run_cli(
        ["replay", RUN_ID], cwd=tmp_path, env={"AUTOPILOT_RUNS_DIR": str(tmp_path / "again")}
    )
    assert f"-- {RUN_ID}: running, iteration 4" in done.stdout.splitlines()[-1]


def test_plain_from_the_end_prints_only_new_events(tmp_path: Path) -> None:
    """After leaving the live view, only what happens next is printed."""
    log = running_log()
    folder = write_run(tmp_path, base_state(iter=3), log.events)
    lines: list[str] = []
    final = log.add("complete", reason="completion_promise")
    threading.Timer(0.4, append_lines, (folder / "events.jsonl", _line(final))).start()
    assert follow_plain(folder, lines.append, liveness=lambda *_: True, from_end=True) == 0
    assert lines == [format_event(final)]


def test_a_waiting_gate_gets_a_hint_and_an_answered_one_none() -> None:
    from autopilot.view.plain import waiting_hint

    asked = {"type": "gate", "state": "waiting", "question": "which\x1b[2J way?\nleft"}
    hint = waiting_hint(asked, "r1")
    assert hint is not None and "\x1b" not in hint and "\n" not in hint
    assert "waits for your answer: which" in hint and "way? left" in hint
    assert hint.endswith("autopilot answer r1 TEXT, or autopilot approve r1")
    assert waiting_hint({"type": "gate", "question": "why?"}, "r1") is not None  # a decision's gate
    assert waiting_hint({"type": "gate", "state": "answered", "answer": "go"}, "r1") is None
    assert waiting_hint({"type": "gate", "state": "released", "question": "why?"}, "r1") is None
    assert waiting_hint({"type": "warning", "question": "why?"}, "r1") is None
