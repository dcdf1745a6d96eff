"""Nothing an agent writes reaches a terminal as a control sequence, nor a secret.

Real escape sequences (an OSC 52 clipboard write, a window title, clear-screen, CSI
colour, a C1 CSI, DCS, bidi overrides) and a real-looking key are put wherever a run
holds agent text — excerpts, notes, reasons, commit subjects, tool summaries, stage
and work-item names, the model name, the raw output — then every command that shows
a run is run with stdout a pipe (where click would not strip anything either).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from autopilot.view.plain import format_event
from autopilot.view.safe import escape_controls, shown, shown_json
from autopilot.view.tui import WatchApp
from tests.conftest import run_cli
from tests.view.runfiles import RUN_ID, EventWriter, FrozenClock, base_state, write_run

HOSTILE = (
    "\x1b]52;c;cHduZWQ=\x07"  # OSC 52: write the clipboard
    "\x1b]0;owned\x07"  # set the window title
    "\x1b[2J\x1b[H"  # clear the screen, cursor home
    "\x1b[31mred\x1b[0m"  # CSI colour
    "\x9b31m"  # C1 CSI
    "\x1bP+q\x1b\\"  # DCS … ST
    "\u202eevil\u202c\u2066x\u2069"  # bidi override, isolate
    "\r\x08\x7f"
)
SECRET = "sk-ant-api03-" + "K3y_" * 20

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def assert_safe(text: str) -> None:
    """No control character (newline and tab aside) and no secret in ``text``."""
    found = CONTROL.findall(text)
    assert found == [], found
    assert SECRET not in text
    assert "sk-ant-" + SECRET[len("sk-ant-") : len("sk-ant-") + 12] not in text


BAD = HOSTILE + " " + SECRET


def _hostile_log() -> EventWriter:
    log = EventWriter()
    log.add("armed", label="demo", maxIterations=10, agent="claude", model=BAD)
    log.add("iteration_start", iteration=1)
    log.add("workitem_start", iteration=1, kind="issue", ref=1, title=BAD)
    log.add("stage_plan", iteration=1, stages=[BAD, "TEST"])
    log.add("stage_start", iteration=1, stage=1, stageName=BAD)
    log.add("substage", iteration=1, sub=1, verb=BAD, argsSummary=BAD)
    log.add("commit_observed", iteration=1, sha="1a2b3c4d5e6f7a8b9c0d", subject=BAD)
    log.add("warning", iteration=1, note=BAD)
    log.add("rate_limited", waitingUntil=log.ts + 60_000, note=BAD)
    log.add("iteration_end", iteration=1, excerpt=BAD, outcome="agent_error", error=BAD)
    return log


def _ended_run(root: Path) -> Path:
    log = _hostile_log()
    log.add("abort", reason=BAD, note=BAD, iteration=1)
    state = base_state(
        iter=1,
        model=BAD,
        status="stopped",
        terminated=True,
        terminationReason=BAD,
        terminationNote=BAD,
    )
    stdout = [
        json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": BAD}]}})
    ]
    return write_run(root, state, log.events, output={1: [*stdout, BAD]})


@pytest.mark.parametrize(
    "args",
    [
        ["status", RUN_ID],
        ["status", "--json", RUN_ID],
        ["list"],
        ["list", "--json"],
        ["replay", RUN_ID],
        ["replay", "--json", RUN_ID],
        ["watch", "--plain", RUN_ID],
        ["stats"],
        ["stats", "--json"],
        ["pause", RUN_ID],  # an error that quotes the run's ending
    ],
)
def test_every_command_shows_agent_text_escaped(tmp_path: Path, args: list[str]) -> None:
    _ended_run(tmp_path / "runs")
    done = run_cli(args, cwd=tmp_path)
    assert done.stdout or done.stderr
    assert_safe(done.stdout)
    assert_safe(done.stderr)
    assert (
        "\\x1b]52;c;" in done.stdout + done.stderr or "\\u001b]52;c;" in done.stdout + done.stderr
    )


def test_work_items_are_shown_escaped(tmp_path: Path) -> None:
    """``tasks`` shows what anyone (an agent too) wrote in .autopilot/tasks.jsonl."""
    project = tmp_path / "project"
    project.mkdir()
    added = run_cli(["tasks", "add", BAD, "--title", BAD, "--criterion", BAD], cwd=project)
    assert added.returncode == 0, added.stderr
    for args in (["tasks", "list"], ["tasks", "list", "--json"], ["tasks", "show", "task-1"]):
        done = run_cli(args, cwd=project)
        assert done.returncode == 0, done.stderr
        assert_safe(done.stdout)
        assert "owned" in done.stdout


def test_json_outputs_still_decode_to_the_redacted_text(tmp_path: Path) -> None:
    _ended_run(tmp_path / "runs")
    done = run_cli(["status", "--json", RUN_ID], cwd=tmp_path)
    state = json.loads(done.stdout)["state"]
    assert state["terminationNote"].startswith(HOSTILE)  # controls kept, as JSON escapes
    assert state["terminationNote"].endswith("sk-ant-[REDACTED]")


def test_status_lines_stay_lines(tmp_path: Path) -> None:
    """A newline in agent text cannot forge a line of ``status``."""
    state = base_state(terminated=True, status="stopped", terminationNote="x\ndriver     alive")
    write_run(tmp_path / "runs", state, [])
    done = run_cli(["status", RUN_ID], cwd=tmp_path)
    assert not any(line.startswith("driver     alive") for line in done.stdout.splitlines())


def test_helpers_escape_visibly_and_idempotently() -> None:
    once = shown(BAD)
    assert_safe(once)
    assert shown(once) == once
    assert "\\x1b]0;owned\\x07" in once and "\\u202eevil" in once and "\\x9b31m" in once
    assert escape_controls("a\nb\tc", newlines=True) == "a\nb\tc"
    assert escape_controls("a\nb") == "a\\x0ab"
    assert json.loads(shown_json({"k": HOSTILE})) == {"k": HOSTILE}
    assert_safe(shown_json({"k": BAD}))
    assert_safe(format_event({"type": "warning", "ts": 1, "runId": "r-1", "note": BAD}))


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


@pytest.mark.anyio
async def test_live_view_shows_agent_text_escaped(tmp_path: Path) -> None:
    """Header, stages, substages, work items, timeline, agent output, last commit."""
    log = _hostile_log()
    log.add("iteration_start", iteration=2)
    log.add("stage_start", iteration=2, stage=1, stageName=BAD)
    log.add("substage", iteration=2, sub=1, verb="Bash", argsSummary=BAD)
    state = base_state(iter=2, model=BAD, status="running")
    text = {"type": "assistant", "message": {"content": [{"type": "text", "text": BAD}]}}
    folder = write_run(tmp_path, state, log.events, output={2: [json.dumps(text), BAD]})
    (folder / "state.json").write_text(json.dumps(state))
    app = WatchApp(folder, clock=FrozenClock(log.ts), liveness=lambda *_: True, follow=False)
    async with app.run_test(size=(160, 50)) as pilot:
        for _ in range(200):
            if app.folded:
                break
            await pilot.pause(0.02)
        await pilot.pause()
        screen: Any = app.export_screenshot()
    assert "owned" in screen  # the hostile text is on screen, escaped
    assert_safe(screen)
