"""The OFF switch (``.autopilot/OFF``) through the real driver, in-process: fake
runner, workspace and clock; the OFF file is a real file in the work tree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from autopilot.config import RunConfig
from autopilot.loop.runner import RunRequest
from tests.conftest import read_jsonl
from tests.fakes import FakeClock, Rig, Scripted, arm, claude_lines


class _Timed(FakeClock):
    """A fake clock that does ``act`` once time reaches ``at_ms``."""

    def __init__(self, now_ms: int) -> None:
        super().__init__(now_ms)
        self.at_ms: int | None = None
        self.act: Callable[[], None] = lambda: None

    def advance(self, seconds: float) -> None:
        super().advance(seconds)
        if self.at_ms is not None and self.ms >= self.at_ms:
            self.at_ms = None
            self.act()


def _rig(tmp_path: Path) -> tuple[Rig, _Timed, Path]:
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    clock = _Timed(rig.clock.ms)
    rig.clock = clock
    off = tmp_path / "work" / ".autopilot" / "OFF"
    off.parent.mkdir(exist_ok=True)
    return rig, clock, off


def _events(rig: Rig, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(rig.folder / "events.jsonl") if e["type"] == kind]


def _working(rig: Rig, on_start: Callable[[RunRequest], None] | None = None) -> Scripted:
    def start(request: RunRequest) -> None:
        rig.workspace.edit()
        if on_start is not None:
            on_start(request)

    return Scripted(claude_lines("did a step"), seconds=12.0, on_start=start)


def test_an_off_switch_removed_while_the_agent_runs_is_a_warning_naming_it(
    tmp_path: Path,
) -> None:
    rig, clock, off = _rig(tmp_path)

    def switched_off_then_removed(_: RunRequest) -> None:
        off.write_text("switched off with 'autopilot off'\n")  # the person, mid-iteration
        clock.at_ms, clock.act = clock.ms + 5_000, off.unlink  # the agent, 5 s later

    driver, runner = rig.driver([_working(rig, switched_off_then_removed), _working(rig)])
    result = driver.run()
    assert result.reason == "max_iterations" and len(runner.requests) == 2  # it went on
    notes = [e["note"] for e in _events(rig, "warning") if "OFF" in e["note"]]
    assert notes == [
        f"the OFF switch {off} was removed while an iteration ran (by its agent, unless"
        " you ran autopilot on): the run goes on; autopilot off holds it again"
    ]
    assert _events(rig, "pause") == []


def test_an_off_switch_turned_on_while_it_holds_the_run_is_no_warning(tmp_path: Path) -> None:
    rig, clock, off = _rig(tmp_path)
    off.write_text("switched off with 'autopilot off'\n")
    clock.at_ms, clock.act = clock.ms + 3_000, off.unlink  # autopilot on, while held
    driver, runner = rig.driver([_working(rig)])
    result = driver.run()
    assert result.reason == "max_iterations" and len(runner.requests) == 2
    assert [e["autopilotOn"] for e in _events(rig, "pause")] == [False]
    assert len(_events(rig, "resume")) == 1
    assert [e for e in _events(rig, "warning") if "OFF" in e["note"]] == []
