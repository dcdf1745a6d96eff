"""A run armed for no session that no session claims: it ends when its claim window
passes (``abort``, ``unclaimed``), whoever looks first (``arm``, a Stop of any
session, ``status``, ``list``), and never blocks a new arming."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autopilot.config_sources import build_config
from autopilot.control import status
from autopilot.core.structs import replace
from autopilot.core.vocabulary import HookAgent
from autopilot.errors import UsageError
from autopilot.hook.arm import arm_hook_run
from autopilot.store.hook_registry import entry_path, load_armings, locked, write_arming
from autopilot.store.paths import runs_root
from autopilot.store.run_state import PromptSource
from tests.fakes import FakeClock
from tests.hook.sessions import Session, arm, events_of, state_of


def _autopilot(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autopilot", *args],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _endings(run_id: str) -> list[str]:
    """The run's terminal events and its iteration and claim events, in order."""
    kinds = ("hook_session", "iteration_start", "iteration_end", "abort", "complete")
    return [
        f"{e['type']} {e['reason']}" if "reason" in e else e["type"]
        for e in events_of(run_id)
        if e["type"] in kinds
    ]


def test_an_unclaimed_run_ends_when_its_window_passes_and_a_new_arming_goes_ahead(
    project: Path,
) -> None:
    clock = FakeClock()
    first = arm(project, clock)
    with pytest.raises(UsageError, match=f"{first} .* it ends at"):
        arm(project, clock)
    clock.advance(301)
    config = build_config({"agent": "claude"}, project=project)
    armed = arm_hook_run(
        runs_root(), config, PromptSource(text="go"), project, HookAgent.CLAUDE, None, clock
    )
    assert [e.run_id for e in armed.expired] == [first]
    assert armed.expired[0].note.startswith(f"no claude session stopped in {project} before ")
    state = state_of(first)
    assert (state["terminated"], state["terminationReason"], state["status"]) == (
        True,
        "unclaimed",
        "stopped",
    )
    assert _endings(first) == ["abort unclaimed"]
    assert [a.run_id for a in load_armings(runs_root())[0]] == [armed.run_id]


def test_the_claim_window_is_given_in_seconds(project: Path) -> None:
    clock = FakeClock()
    config = build_config({"agent": "claude"}, project=project)
    armed = arm_hook_run(
        runs_root(),
        config,
        PromptSource(text="go"),
        project,
        HookAgent.CLAUDE,
        None,
        clock,
        claim_window_seconds=30,
    )
    assert armed.arming.claim_until_ms == clock.now_ms() + 30_000


def test_the_next_stop_of_any_session_ends_an_unclaimed_run_past_its_window(
    tmp_path: Path, project: Path
) -> None:
    clock = FakeClock()
    run_id = arm(project, clock)
    clock.advance(301)
    session = Session(tmp_path, project)
    assert session.stop(clock, last="hi") == ""
    assert _endings(run_id) == ["abort unclaimed"]
    assert not entry_path(runs_root(), run_id).exists()
    assert session.stop(clock, last="hi") == ""
    assert _endings(run_id) == ["abort unclaimed"]  # once


def test_status_leaves_an_unclaimed_run_alone_while_a_stop_holds_the_registry(
    project: Path,
) -> None:
    clock = FakeClock()
    run_id = arm(project, clock)
    clock.advance(301)
    with locked(runs_root()):
        report = status(runs_root() / run_id, clock)
    assert not report.state.terminated  # status never waits for a Stop being answered
    assert status(runs_root() / run_id, clock).state.termination_reason == "unclaimed"


def test_list_and_status_show_an_unclaimed_run_and_end_it_once_its_window_passed(
    project: Path,
) -> None:
    armed = _autopilot(project, "arm", "-p", "go", "--claim-window", "10m")
    assert armed.returncode == 0, armed.stderr
    assert "within 10m00s (unclaimed by then, the run ends)" in armed.stdout
    (arming,) = load_armings(runs_root())[0]
    assert 590_000 <= arming.claim_until_ms - time.time() * 1000 <= 600_000
    listed = _autopilot(project, "list").stdout
    assert "armed, unclaimed until " in listed
    with locked(runs_root()):
        write_arming(runs_root(), replace(arming, claim_until_ms=int(time.time() * 1000) - 1))
    listed = _autopilot(project, "list").stdout
    assert f"{arming.run_id}" in listed and "aborted (unclaimed)" in listed
    shown = _autopilot(project, "status", arming.run_id).stdout
    assert "status     aborted (unclaimed)" in shown
    assert f"no claude session stopped in {project} before " in shown
    as_json = json.loads(_autopilot(project, "status", "--json", arming.run_id).stdout)
    assert as_json["hook"]["armed"] is False
    assert _endings(arming.run_id) == ["abort unclaimed"]


def test_a_claim_window_that_is_not_a_duration_is_a_one_line_error(project: Path) -> None:
    done = _autopilot(project, "arm", "-p", "go", "--claim-window", "soon")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "autopilot: error: --claim-window must be a duration like 90s, 30m or 2h, got 'soon'"
    ]
    assert load_armings(runs_root())[0] == []
