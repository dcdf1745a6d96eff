"""Snapshots of ``autopilot watch`` for a running, paused, rate-limited, completed and
aborted run, from logs and state files with fixed timestamps and a frozen clock."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from autopilot.view.tui import WatchApp
from autopilot.view.widgets import Timeline
from tests.view.runfiles import (
    EventWriter,
    FrozenClock,
    agent_output,
    base_state,
    running_log,
    write_run,
)

SIZE = (130, 40)


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Times on screen are local: pin the zone so snapshots match everywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def _loaded(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, WatchApp)
    for _ in range(200):
        if app.folded:
            break
        await pilot.pause(0.02)
    assert app.folded
    # The timeline is moved to its end after a refresh: wait until it is there, so the
    # picture does not depend on how fast this machine draws.
    timeline = app.query_one(Timeline)
    for _ in range(200):
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        if timeline.scroll_y == timeline.max_scroll_y:
            break
    await pilot.pause()


def _app(folder: Path, now_ms: int, alive: bool | None = True) -> WatchApp:
    return WatchApp(folder, clock=FrozenClock(now_ms), liveness=lambda *_: alive, follow=False)


def _finished_two(log: EventWriter) -> None:
    log.add("armed", label="demo", maxIterations=10, minIterations=1, agent="claude")
    log.iteration(1, (2000, 200), 0.01, "1a2b3c4d5e6f7a8b9c0d")
    log.iteration(2, (5500, 480), 0.025, "a1b2c3d4e5f60718293a")


Compare = Callable[..., bool]


def test_running(tmp_path: Path, snap_compare: Compare) -> None:
    """A run mid-iteration: stage IMPLEMENT with substages, a task running, live output."""
    log = running_log()
    state = base_state(
        iter=3,
        spend={"costUsd": 0.025, "tokens": {"input": 5500, "output": 480}, "iterations": 2},
    )
    folder = write_run(tmp_path, state, log.events, output={3: agent_output()})
    app = _app(folder, log.ts + 42_000)
    assert snap_compare(app, terminal_size=SIZE, run_before=_loaded)


def test_paused(tmp_path: Path, snap_compare: Compare) -> None:
    """Paused at a boundary: elapsed time leaves the pause out; r resumes, p is hidden."""
    log = EventWriter()
    _finished_two(log)
    pause = log.add("pause")
    state = base_state(
        iter=2,
        status="paused",
        paused=True,
        pausedAt=pause["ts"] - 5000,
        totalPausedMs=60_000,
        spend={"costUsd": 0.025, "tokens": {"input": 5500, "output": 480}, "iterations": 2},
    )
    folder = write_run(tmp_path, state, log.events)
    app = _app(folder, pause["ts"] + 600_000)
    assert snap_compare(app, terminal_size=SIZE, run_before=_loaded)


def test_rate_limited(tmp_path: Path, snap_compare: Compare) -> None:
    """Waiting out a usage limit: the badge counts down to the reset."""
    log = EventWriter()
    _finished_two(log)
    log.add("iteration_start", iteration=3)
    log.add(
        "iteration_end",
        iteration=3,
        outcome="rate_limited",
        error="You've hit your limit · resets 7pm",
        tokens={"input": 5500, "output": 480},
        durationMs=4000,
    )
    until = log.ts + 25 * 60_000
    log.add("rate_limited", waitingUntil=until, note="usage limit; resets 7pm")
    state = base_state(
        iter=3,
        status="rate_limited",
        waitingUntil=until,
        spend={"costUsd": 0.025, "tokens": {"input": 5500, "output": 480}, "iterations": 2},
    )
    folder = write_run(tmp_path, state, log.events)
    app = _app(folder, log.ts + 90_000)
    assert snap_compare(app, terminal_size=SIZE, run_before=_loaded)


def test_completed(tmp_path: Path, snap_compare: Compare) -> None:
    """A finished run shows its final state; elapsed is frozen at the terminal event."""
    log = EventWriter()
    _finished_two(log)
    log.iteration(3, (7100, 560), 0.031, "0f1e2d3c4b5a69788796")
    log.add("complete", reason="completion_promise", iteration=3)
    state = base_state(
        iter=3,
        status="completed",
        terminated=True,
        terminationReason="completion_promise",
        spend={"costUsd": 0.031, "tokens": {"input": 7100, "output": 560}, "iterations": 3},
    )
    folder = write_run(tmp_path, state, log.events, output={3: agent_output()})
    app = _app(folder, log.ts + 3_600_000, alive=None)
    assert snap_compare(app, terminal_size=SIZE, run_before=_loaded)


def test_aborted(tmp_path: Path, snap_compare: Compare) -> None:
    """Aborted by stagnation: the reason and note are shown, no control keys offered."""
    log = EventWriter()
    _finished_two(log)
    for number in (3, 4, 5):
        log.add("iteration_start", iteration=number)
        log.add(
            "iteration_end",
            iteration=number,
            outcome="ok",
            excerpt="Nothing left to do.",
            tokens={"input": 5500 + number, "output": 480},
        )
        log.add("stagnation", iteration=number, streak=number - 2, limit=3)
    log.add("abort", reason="stagnation", note="3 iterations without progress", iteration=5)
    state = base_state(
        iter=5,
        status="stopped",
        terminated=True,
        terminationReason="stagnation",
        terminationNote="3 iterations without progress",
        spend={"costUsd": 0.025, "tokens": {"input": 5505, "output": 480}, "iterations": 5},
    )
    folder = write_run(tmp_path, state, log.events)
    app = _app(folder, log.ts + 60_000, alive=None)
    assert snap_compare(app, terminal_size=SIZE, run_before=_loaded)


def test_stop_asks_first(tmp_path: Path, snap_compare: Compare) -> None:
    """``s`` opens a confirmation; nothing is written until it is answered."""
    log = running_log()
    folder = write_run(tmp_path, base_state(iter=3), log.events)
    app = _app(folder, log.ts + 1000)

    async def press_stop(pilot: Pilot[Any]) -> None:
        await _loaded(pilot)
        await pilot.press("s")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=press_stop)
    assert '"stopRequested": false' in (folder / "state.json").read_text()
