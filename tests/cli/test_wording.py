"""What the commands say about a run: its status with what is pending, a driver that
died, a resume with nothing to resume, moments in local time, and the option names."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autopilot.view.plain import format_event
from tests.conftest import run_cli
from tests.manage.runs import alive_driver, dead_driver
from tests.view.runfiles import RUN_ID, T0, EventWriter, base_state, write_run


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _status_line(tmp_path: Path, **state: object) -> str:
    log = EventWriter()
    log.add("armed", label="demo", maxIterations=10, agent="claude")
    write_run(tmp_path / "runs", base_state(**state), log.events)
    done = run_cli(["status", RUN_ID], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("status ")]
    return line.split(None, 1)[1]


@pytest.mark.parametrize(
    ("state", "shown"),
    [
        ({"stopRequested": True}, "running (stop requested)"),
        ({"stopRequested": True, "stopNow": True}, "running (stop --now requested)"),
        ({"paused": True}, "running (pause requested)"),
        ({"paused": True, "status": "paused"}, "paused"),
        (
            {"terminated": True, "status": "completed", "terminationReason": "completion_promise"},
            "completed (completion_promise)",
        ),
        (
            {"terminated": True, "status": "stopped", "terminationReason": "user_stopped"},
            "stopped by the user",
        ),
    ],
)
def test_status_says_what_is_pending_and_how_it_ended_once(
    tmp_path: Path, state: dict[str, object], shown: str
) -> None:
    assert _status_line(tmp_path, **alive_driver(), **state) == shown


@pytest.mark.parametrize(
    ("state", "shown"),
    [
        ({}, "driver gone — was running"),
        ({"paused": True, "status": "paused"}, "driver gone — was paused"),
        (
            {"terminated": True, "status": "completed", "terminationReason": "completion_promise"},
            "completed (completion_promise)",
        ),
    ],
)
def test_status_of_a_run_whose_driver_died_leads_with_that(
    tmp_path: Path, state: dict[str, object], shown: str
) -> None:
    assert _status_line(tmp_path, **dead_driver(), **state) == shown


def test_status_shows_a_limit_wait_in_local_time(tmp_path: Path, utc: None) -> None:
    until = int(time.time() * 1000) + 3_600_000
    shown = _status_line(tmp_path, **alive_driver(), status="rate_limited", waitingUntil=until)
    clock = time.strftime("%H:%M:%S", time.gmtime(until / 1000))
    assert re.fullmatch(rf"rate_limited until (\d{{4}}-\d\d-\d\dT)?{clock}", shown), shown


def test_list_shows_a_run_whose_driver_died(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    log = EventWriter()
    log.add("armed", label="demo", maxIterations=10, agent="claude")
    write_run(root, base_state(iter=2, **dead_driver()), log.events)
    other = EventWriter(f"alive-{T0 + 1}", T0 + 1)
    other.add("armed", label="alive", maxIterations=10, agent="claude")
    write_run(root, base_state(f"alive-{T0 + 1}", iter=1, **alive_driver()), other.events)
    lines = run_cli(["list"], cwd=tmp_path).stdout.splitlines()
    (gone,) = [line for line in lines if RUN_ID in line]
    (alive,) = [line for line in lines if f"alive-{T0 + 1}" in line]
    assert gone.endswith(f"driver gone (autopilot start {RUN_ID} relaunches it)")
    assert alive.endswith(" running")


def test_resume_says_when_there_is_nothing_to_resume(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".autopilot").mkdir(parents=True)
    state = base_state(cwd=str(project), host=socket.gethostname())
    folder = write_run(tmp_path / "runs", state, None)
    done = run_cli(["resume", RUN_ID], cwd=tmp_path)
    assert done.stdout.strip() == f"{RUN_ID}: not paused; nothing to resume"
    write_run(tmp_path / "runs", dict(state, paused=True, status="paused"), None)
    (project / ".autopilot" / "OFF").write_text("")
    done = run_cli(["resume", RUN_ID], cwd=tmp_path)
    off = project / ".autopilot" / "OFF"
    assert done.stdout.strip() == (
        f"{RUN_ID}: still paused by {off}; autopilot on (or remove that file) to resume"
    )
    off.unlink()
    write_run(tmp_path / "runs", dict(state, paused=True, status="paused"), None)
    assert run_cli(["resume", RUN_ID], cwd=tmp_path).stdout.strip() == f"{RUN_ID}: resumed"
    assert '"paused": false' in (folder / "state.json").read_text()
    # Held by the driver until a file is fixed: resume cannot help, and says so.
    why = "fix .autopilot/tasks.jsonl first: .autopilot/tasks.jsonl line 2: not valid JSON"
    write_run(tmp_path / "runs", dict(state, status="paused", hold=why), None)
    done = run_cli(["resume", RUN_ID], cwd=tmp_path)
    assert done.stdout.strip() == f"{RUN_ID}: still paused until the file is fixed: {why}"


def test_plain_lines_show_moments_in_local_time(utc: None) -> None:
    event = {"type": "rate_limited", "ts": T0, "runId": RUN_ID, "waitingUntil": T0 + 3_600_000}
    assert "waitingUntil=01:53:20" in format_event(event)  # T0 is 00:53:20 UTC
    later = dict(event, waitingUntil=T0 + 2 * 86_400_000)
    assert "waitingUntil=2026-12-02T00:53:20" in format_event(later)
    assert "iteration=3" in format_event(dict(event, iteration=3))  # counts stay numbers


def test_help_names_what_each_option_takes(tmp_path: Path) -> None:
    shown = run_cli(["run", "--help"], cwd=tmp_path).stdout
    assert "VALUE" not in shown
    for option, metavar in (
        ("--max-iterations", "N"),
        ("--max-cost", "USD"),
        ("--max-tokens", "N"),
        ("--max-duration", "DURATION"),
        ("--iteration-timeout", "DURATION"),
        ("--completion-promise", "TOKEN"),
        ("--env-exclude", "PATTERN"),
    ):
        assert re.search(rf"{option} {metavar}\b", shown), option
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "`--max-cost USD`" in readme and "`--max-duration DURATION`" in readme


def test_watch_help_names_every_key_of_the_live_view() -> None:
    from click.testing import CliRunner
    from textual.binding import Binding

    from autopilot.cli.watch_cmds import watch
    from autopilot.view.tui import WatchApp

    shown = " ".join(CliRunner().invoke(watch, ["--help"]).output.split())
    keys = {b.key for b in WatchApp.BINDINGS if isinstance(b, Binding) and b.show}
    assert keys == {"p", "r", "s", "m", "q"}
    for key in sorted(keys):
        assert re.search(rf"\b{key} [a-z]", shown), key
    assert "m send a message to the agent" in shown


def test_start_of_an_ended_run_says_what_to_do_and_its_help_says_so(tmp_path: Path) -> None:
    log = EventWriter()
    log.add("armed", label="demo", maxIterations=10, agent="claude")
    ended = {"terminated": True, "status": "stopped", "terminationReason": "user_stopped"}
    write_run(tmp_path / "runs", base_state(**dead_driver(), **ended), log.events)
    done = run_cli(["start", RUN_ID], cwd=tmp_path)
    assert (done.returncode, done.stderr) == (
        2,
        f"autopilot: error: run {RUN_ID} has already ended (user_stopped); an ended run "
        "cannot be started again: begin a new one with autopilot run\n",
    )
    shown = " ".join(run_cli(["start", "--help"], cwd=tmp_path).stdout.split())
    assert "whatever its status" not in shown
    assert "An ended run (completed, aborted, stopped) cannot be started again" in shown
