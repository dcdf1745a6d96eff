"""The live view, headless: following a growing, torn, absent or replaced log; keys."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from autopilot.store.events import read_events
from autopilot.view.live import drive_live
from autopilot.view.tui import WatchApp
from autopilot.view.widgets import AgentOutput, StagePane, Timeline
from tests.view.runfiles import (
    T0,
    EventWriter,
    FrozenClock,
    agent_output,
    append_lines,
    base_state,
    running_log,
    write_run,
)

SIZE = (120, 40)
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """Textual runs on asyncio."""
    return "asyncio"


def _line(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":")) + "\n"


def _timeline_text(app: WatchApp) -> str:
    return "\n".join(strip.text for strip in app.query_one(Timeline).lines)


def _output_text(app: WatchApp) -> str:
    return "\n".join(strip.text for strip in app.query_one(AgentOutput).lines)


async def _until(pilot: Pilot[Any], check: Callable[[], bool], timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        await pilot.pause(0.02)
    raise AssertionError("the view did not get there in time")


def _app(folder: Path, **options: Any) -> WatchApp:
    options.setdefault("clock", FrozenClock(T0 + 60_000))
    options.setdefault("liveness", lambda *_: True)
    return WatchApp(folder, **options)


async def test_absent_log_then_torn_line_then_whole(tmp_path: Path) -> None:
    """No log yet: the header comes from state.json; a partial line waits for its newline."""
    folder = write_run(tmp_path, base_state(), None)
    log = folder / "events.jsonl"
    app = _app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        assert app.snapshot.runId is None
        assert app.state is not None and app.state["runId"] == folder.name
        armed = _line({"type": "armed", "ts": T0, "runId": folder.name, "label": "demo"})
        start = _line(
            {"type": "iteration_start", "ts": T0 + 5, "runId": folder.name, "iteration": 1}
        )
        append_lines(log, armed + start[:20])
        await _until(pilot, lambda: app.snapshot.runId == folder.name)
        await pilot.pause(0.3)
        assert app.snapshot.iteration == 0, "a torn line must be held back"
        assert "iteration 1 started" not in _timeline_text(app)
        append_lines(log, start[20:])
        await _until(pilot, lambda: app.snapshot.iteration == 1)
        assert "iteration 1 started" in _timeline_text(app)


async def test_follows_new_events_and_output(tmp_path: Path) -> None:
    """Appended events are folded incrementally; the iteration's output is rendered."""
    log = running_log()
    folder = write_run(tmp_path, base_state(iter=3), log.events, output={3: agent_output()[:3]})
    app = _app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded and "I'll look at" in _output_text(app))
        before = app.snapshot.iteration
        assert before == 3
        assert "▸ Read /work/project/src/login.py" in _output_text(app)
        append_lines(folder / "iter-0003" / "stdout.log", agent_output()[4] + "\n")
        await _until(pilot, lambda: "Bash pytest -q tests/test_login.py" in _output_text(app))
        commit = log.add("commit_observed", iteration=3, sha="abcdef1234567", subject="fix login")
        end = log.add("iteration_end", iteration=3, outcome="ok", excerpt="done")
        append_lines(folder / "events.jsonl", _line(commit) + _line(end))
        await _until(pilot, lambda: app.snapshot.outcomes.get("3") == "ok")
        assert app.snapshot.lastCommit is not None
        assert app.snapshot.lastCommit["sha"] == "abcdef1234567"
        (folder / "iter-0004").mkdir()
        (folder / "iter-0004" / "stdout.log").write_text(agent_output()[1] + "\n")
        append_lines(folder / "events.jsonl", _line(log.add("iteration_start", iteration=4)))
        await _until(pilot, lambda: app.snapshot.iteration == 4)
        await _until(pilot, lambda: "I'll look at" in _output_text(app))
        assert "Bash pytest" not in _output_text(app), "a new iteration starts a new tail"


async def test_replaced_log_is_read_again(tmp_path: Path) -> None:
    """A log that is truncated or replaced is folded again from its start."""
    log = running_log()
    folder = write_run(tmp_path, base_state(iter=3), log.events)
    app = _app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        assert app.snapshot.iteration == 3
        other = EventWriter()
        other.add("armed", label="demo")
        other.add("iteration_start", iteration=1)
        replacement = folder / "events.new"
        replacement.write_text("".join(_line(e) for e in other.events))
        replacement.replace(folder / "events.jsonl")
        await _until(pilot, lambda: app.folded and app.snapshot.iteration == 1)
        assert app.snapshot.lastCommit is None


async def test_fold_matches_the_store_fold(tmp_path: Path) -> None:
    """The view's streaming fold gives the same snapshot as ``fold(read_events())``."""
    from autopilot.store.fold import fold

    log = running_log()
    folder = write_run(tmp_path, base_state(iter=3), log.events)
    app = _app(folder, follow=False)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        assert app.snapshot == fold(read_events(folder / "events.jsonl"))


async def test_pause_resume_keys_write_state(tmp_path: Path) -> None:
    """p and r act through state.json, exactly like ``autopilot pause|resume``."""
    folder = write_run(tmp_path, base_state(iter=3), running_log().events)
    app = _app(folder, clock=FrozenClock(T0 + 90_000))
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        assert app.check_action("resume", ()) is False
        await pilot.press("p")
        state = json.loads((folder / "state.json").read_text())
        # The request only; the driver stamps pausedAt when it reaches the boundary.
        assert state["paused"] is True and state["pausedAt"] is None
        assert app.check_action("pause", ()) is False
        assert app.check_action("resume", ()) is True
        app.clock = FrozenClock(T0 + 100_000)
        await pilot.press("r")
        state = json.loads((folder / "state.json").read_text())
        assert state["paused"] is False and state["totalPausedMs"] == 0


async def test_stop_needs_confirmation(tmp_path: Path) -> None:
    """s asks; n keeps the run; y stops it (no driver here, so it ends at once)."""
    folder = write_run(tmp_path, base_state(iter=3), running_log().events)
    app = _app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        await pilot.press("s")
        await pilot.press("n")
        assert json.loads((folder / "state.json").read_text())["stopRequested"] is False
        await pilot.press("s")
        await pilot.press("y")
        state = json.loads((folder / "state.json").read_text())
        assert state["stopRequested"] is True and state["terminated"] is True
        events = list(read_events(folder / "events.jsonl"))
        assert events[-1]["type"] == "abort" and events[-1]["reason"] == "user_stopped"
        await _until(pilot, lambda: app.snapshot.terminal)
        assert app.check_action("stop", ()) is False


async def test_leaving_changes_nothing(tmp_path: Path) -> None:
    """q closes the view and leaves the run's files as they were."""
    folder = write_run(tmp_path, base_state(iter=3), running_log().events)
    before = (folder / "state.json").read_bytes(), (folder / "events.jsonl").read_bytes()
    app = _app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert ((folder / "state.json").read_bytes(), (folder / "events.jsonl").read_bytes()) == before


async def test_message_key_only_with_an_inbox(tmp_path: Path) -> None:
    """m is hidden without a way to send; with one, the typed text is sent."""
    folder = write_run(tmp_path, base_state(iter=3), running_log().events)
    app = _app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        assert app.check_action("message", ()) is False
        shown = {active.binding.action for active in app.screen.active_bindings.values()}
        assert "message" not in shown and "pause" in shown
    sent: list[str] = []
    app = _app(folder, send_message=lambda text: sent.append(text) or "queued")
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        assert app.check_action("message", ()) is True
        await pilot.press("m")
        await pilot.press(*"hello", "enter")
        await pilot.pause()
    assert sent == ["hello"]


async def test_finished_run_offers_no_controls(tmp_path: Path) -> None:
    """A finished run shows its final state; p, r and s are not offered."""
    log = running_log()
    log.add("abort", reason="max_iterations", note="reached max=3", iteration=3)
    state = base_state(
        iter=3, terminated=True, status="stopped", terminationReason="max_iterations"
    )
    folder = write_run(tmp_path, state, log.events)
    app = _app(folder, liveness=lambda *_: None)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        assert app.snapshot.terminal and app.snapshot.reason == "max_iterations"
        for action in ("pause", "resume", "stop"):
            assert app.check_action(action, ()) is False


def _screen_lines(app: WatchApp) -> list[str]:
    """The screen as text, one line per row (what a terminal would show)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def _plain_run_log() -> EventWriter:
    """Two finished iterations of an agent that reports no stages and no work items."""
    log = EventWriter()
    log.add("armed", label="demo", maxIterations=10, agent="claude", model="claude-sonnet-4-5")
    for n in (1, 2):
        tokens = {"input": 12_000 * n, "output": 900 * n}
        log.add("iteration_start", iteration=n)
        log.add("substage", iteration=n, sub=1, verb="Bash", argsSummary="pytest -q")
        log.add("iteration_end", iteration=n, outcome="ok", tokens=tokens, costUsd=0.01 * n)
    log.add("iteration_start", iteration=3)
    return log


async def test_header_fits_80_columns_and_empty_panels_give_way(tmp_path: Path) -> None:
    """At 80 columns every counter of the header is readable (no sparkline over it), and
    an agent that reports no stages or work items leaves the room to the timeline."""
    log = _plain_run_log()
    state = base_state(iter=3, spend={"costUsd": 0.02, "tokens": {"input": 24_000, "output": 1800}})
    folder = write_run(tmp_path, state, log.events)
    app = _app(folder, clock=FrozenClock(log.ts + 16_000))
    async with app.run_test(size=(80, 30)) as pilot:
        await _until(pilot, lambda: app.folded)
        await pilot.pause()
        lines = _screen_lines(app)
        assert lines[1].startswith(" iteration 3 of 10 · elapsed ")
        assert lines[1].rstrip().endswith(" · tokens 24.0k in / 1800 out · $0.0200")
        assert lines[0].endswith(" RUNNING ") and "…" in lines[0]
        assert not app.query_one("#stages").display and not app.query_one("#left").display
        assert app.query_one(Timeline).region.width == 80
    app = _app(folder, clock=FrozenClock(log.ts + 16_000))
    async with app.run_test(size=(160, 30)) as pilot:
        await _until(pilot, lambda: app.folded)
        await pilot.pause()
        assert "tokens/iter" in _screen_lines(app)[1]  # wide enough for the sparkline


async def test_the_stage_clock_ticks_as_a_repaint_and_a_still_second_redraws_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every second the active stage's elapsed time is shown anew, without laying the
    screen out again (the pane's size is the layout's, not its text's); a second that
    changes no shown figure (a frozen clock) does not redraw the pane at all."""
    log = running_log()
    folder = write_run(tmp_path, base_state(iter=3), log.events)
    clock = FrozenClock(log.ts + 5_000)
    app = _app(folder, clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        await pilot.pause()
        pane = app.query_one(StagePane)
        layouts: list[bool] = []
        update = pane.update

        def spy(content: Any = "", *, layout: bool = True) -> None:
            layouts.append(layout)
            update(content, layout=layout)

        monkeypatch.setattr(pane, "update", spy)
        stage = app.snapshot.activeStage
        assert stage is not None
        clock.now = stage["startedAt"] + 65_000
        app._tick()
        await pilot.pause()
        assert any("IMPLEMENT  stage 2, 1m05s" in line for line in _screen_lines(app))
        assert layouts == [False]
        app._tick()
        app._tick()
        await pilot.pause()
        assert layouts == [False]
        clock.now += 1_000
        app._tick()
        await pilot.pause()
        assert any("IMPLEMENT  stage 2, 1m06s" in line for line in _screen_lines(app))
        assert layouts == [False, False]


async def test_stages_and_work_items_show_when_reported(tmp_path: Path) -> None:
    folder = write_run(tmp_path, base_state(iter=3), running_log().events)
    app = _app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        await pilot.pause()
        for panel in ("#stages", "#left", "#stage", "#work"):
            assert app.query_one(panel).display, panel


async def test_an_ended_run_offers_close_not_leave(tmp_path: Path) -> None:
    """ "Leave (run goes on)" is for a run that goes on; an ended run's view just closes."""
    log = running_log()
    log.add("complete", reason="completion_promise", iteration=3)
    folder = write_run(tmp_path, base_state(iter=3, terminated=True), log.events)
    app = _app(folder, liveness=lambda *_: None)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        await pilot.pause()
        shown = {b.binding.description for b in app.screen.active_bindings.values()}
        footer = _screen_lines(app)[-1]
        assert "Close" in footer and "Leave" not in footer, footer
        assert "Leave (run goes on)" not in shown or not app.check_action("leave", ())
        await pilot.press("q")
    assert app.return_code == 0 and not app.is_running


async def test_ctrl_c_beside_the_driver_says_stopping_at_once(tmp_path: Path) -> None:
    """After one ctrl+c the badge says STOPPING (not RUNNING) until the boundary."""
    folder = write_run(tmp_path, base_state(iter=3), running_log().events)
    presses: list[int] = []

    def interrupt() -> str:
        presses.append(1)
        return "stopping at the next boundary; ctrl+c again ends the agent now"

    app = _app(folder, on_interrupt=interrupt)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        assert "RUNNING" in _screen_lines(app)[0]
        await pilot.press("ctrl+c")
        await pilot.pause()
        top = _screen_lines(app)[0]
        assert "STOPPING" in top and "RUNNING" not in top
        assert "stopping at the next boundary" in top
        assert app.check_action("stop", ()) is False
    assert presses == [1]


def test_drive_live_returns_the_drivers_result(tmp_path: Path) -> None:
    """The hook for ``run``: the view closes by itself when the driver thread ends."""
    log = running_log()
    folder = write_run(tmp_path, base_state(iter=3), log.events)
    started = threading.Event()

    def drive() -> str:
        started.set()
        append_lines(folder / "events.jsonl", _line(log.add("complete", reason="done")))
        return "result"

    assert drive_live(drive, tmp_path, folder.name, headless=True) == "result"
    assert started.is_set()


def test_drive_live_reraises(tmp_path: Path) -> None:
    """An error in the driver thread reaches the caller."""
    folder = write_run(tmp_path, base_state(iter=3), running_log().events)

    def drive() -> str:
        raise RuntimeError("driver broke")

    with pytest.raises(RuntimeError, match="driver broke"):
        drive_live(drive, tmp_path, folder.name, headless=True)


async def test_the_message_key_queues_in_the_runs_inbox(tmp_path: Path) -> None:
    """m in the live view of a real run folder queues a durable message."""
    from autopilot.loop.messages import message_sender
    from autopilot.store.inbox import Inbox

    folder = write_run(tmp_path, base_state(iter=3, cwd=str(tmp_path)), running_log().events)
    app = _app(folder, send_message=message_sender(folder, FrozenClock(T0)))
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.folded)
        await pilot.press("m")
        await pilot.press(*"use pathlib", "enter")
        await pilot.pause()
    assert [m.text for m in Inbox(folder).pending()] == ["use pathlib"]
