"""Plain ``autopilot status`` on plain JSON (``cli.status_light``) prints what the typed
path (``control_body.typed_status``, through ``autopilot.control``) prints, byte for
byte, whatever the run's state, log and inbox; and it is taken for the usual runs."""

from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from autopilot.cli import control_body
from autopilot.core.vocabulary import HOOK_MODE, RunStatus
from autopilot.store.flock import FileLock
from tests.store.test_status_figures import MESSAGES, events_of, moments, write_inbox
from tests.view.runfiles import base_state

_RUN = "proj-1700000000000"
_START = 1_700_000_000_000
_NOW_MS = 1_700_000_500_000

_ME = {"pid": os.getpid(), "pidStartTime": psutil.Process().create_time()}
_GONE = {"pid": 999_999_999, "pidStartTime": 1.0}
_HOST = socket.gethostname()


@st.composite
def _states(draw: st.DrawFn, project: Path) -> dict[str, Any]:
    terminated = draw(st.booleans())
    worktree = {"path": str(project), "branch": "ap/x", "base": "main", "origin": "main"}
    state = base_state(
        _RUN,
        mode=draw(st.sampled_from(["prompt", "prompt", "prompt", "backlog", HOOK_MODE])),
        cwd=draw(st.sampled_from([str(project), None, "/nowhere/project"])),
        model=draw(st.sampled_from([None, "m-1", "a\nb"])),
        max=draw(st.sampled_from([10, 0, 3.0])),
        iter=draw(st.integers(0, 12)),
        status=draw(st.sampled_from([*(s.value for s in RunStatus), "from_a_newer_version"])),
        paused=draw(st.booleans()),
        pausedAt=draw(st.one_of(st.none(), moments)),
        totalPausedMs=draw(st.sampled_from([0, 1234, 99.5])),
        stopRequested=draw(st.booleans()),
        stopNow=draw(st.booleans()),
        waitingUntil=draw(st.one_of(st.none(), moments)),
        gate=draw(st.sampled_from([None, "merge it?"])),
        hold=draw(st.sampled_from([None, "tasks.jsonl line 3 is broken"])),
        host=_HOST,
        spend=draw(
            st.sampled_from(
                [
                    {"costUsd": 0.5, "tokens": {"input": 10, "output": 3}, "iterations": 2},
                    {"costUsd": 1, "tokens": {"input": 1.5}},
                    {},
                ]
            )
        ),
        terminated=terminated,
        terminationReason=draw(st.sampled_from(["complete", "user_stopped", "error", None]))
        if terminated
        else None,
        terminationNote=draw(st.sampled_from([None, "", "ended\n  early"])),
    )
    state.update(draw(st.sampled_from([_ME, _ME, _ME, _GONE, {}])))
    for key, choices in (
        ("supervisorPid", [None, os.getpid(), 999_999_998]),
        ("agentPid", [None, 999_999_997]),
        ("iterationOpen", [None, True]),
        ("agentEnv", [None, [], ["ANTHROPIC_API_KEY"]]),
        ("envMissing", [None, ["ANTHROPIC_API_KEY"]]),
        ("worktree", [None, worktree, {"path": 3}]),
        ("parallel", [None, None, None, {"lanes": 2}]),
    ):
        value = draw(st.sampled_from(choices))
        if value is not None:
            state[key] = value
    if state.get("supervisorPid") == os.getpid():
        state["supervisorStartTime"] = _ME["pidStartTime"]
    for key in draw(
        st.sets(st.sampled_from(["startedAt", "status", "spend", "agent", "max"]), max_size=2)
    ):
        del state[key]
    return state


def _write_run(
    root: Path, state: dict[str, Any], events: list[dict[str, Any]], messages: set[int]
) -> Path:
    folder = root / _RUN
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    write_inbox(folder, messages)
    return folder


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.data(),
    events_of(_RUN),
    st.sets(st.integers(0, len(MESSAGES) - 1)),
    st.booleans(),
    st.booleans(),
)
def test_light_and_typed_status_agree(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    data: st.DataObject,
    events: list[dict[str, Any]],
    messages: set[int],
    held: bool,
    off: bool,
) -> None:
    """Whenever the light path answers, its lines are the typed path's."""
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        (project / ".autopilot").mkdir(parents=True)
        if off:
            (project / ".autopilot" / "OFF").write_text("")
        state = data.draw(_states(project))
        folder = _write_run(Path(tmp) / "runs", state, events, messages)
        monkeypatch.setenv("AUTOPILOT_RUNS_DIR", str(Path(tmp) / "runs"))
        monkeypatch.chdir(tmp)
        driver = FileLock(folder / "driver.lock")
        assert not held or driver.acquire()
        try:
            light = control_body.plain_status_lines(folder, _NOW_MS)
            event("light" if light is not None else "typed")
            if light is None:
                return
            capsys.readouterr()
            assert control_body.typed_status(folder, False, _NOW_MS) == 0
            typed = capsys.readouterr().out
        finally:
            if held:
                driver.release()
    assert "\n".join(light) + "\n" == typed


def _usual_state(**changes: Any) -> dict[str, Any]:
    return base_state(_RUN, host=_HOST, iter=1, **{**_ME, **changes})


@pytest.mark.parametrize(
    ("changes", "plain"),
    [
        ({}, True),
        ({"paused": True, "pausedAt": _START + 5}, True),
        ({"stopRequested": True, "status": "rate_limited", "waitingUntil": _NOW_MS}, True),
        ({"terminated": True, "terminationReason": "complete", "status": "completed"}, True),
        (_GONE, False),  # the log may hold its end
        ({"mode": HOOK_MODE}, False),
        ({"parallel": {}}, False),
        ({"agent": None}, False),  # the config's agent
    ],
)
def test_the_light_path_is_taken_for_the_usual_runs(
    tmp_path: Path, changes: dict[str, Any], plain: bool
) -> None:
    """It can fail: a run the light path should read is left to the typed path."""
    events = [
        {"type": "armed", "ts": _START, "runId": _RUN},
        {"type": "iteration_start", "ts": _START + 1, "runId": _RUN, "iteration": 1},
        {"type": "usage_update", "ts": _START + 2, "runId": _RUN, "excerpt": "working"},
    ]
    folder = _write_run(tmp_path, _usual_state(**changes), events, {0, 1})
    lines = control_body.plain_status_lines(folder, _NOW_MS)
    assert (lines is not None) is plain
    if lines is not None:
        assert lines[0] == f"run        {_RUN}"
        assert lines[-1] == "last       working"
        if not changes:
            assert (
                "messages   1 of yours and 1 autopilot notice waiting for the next iteration"
                in lines
            )


def test_a_malformed_message_is_left_to_the_typed_path(tmp_path: Path) -> None:
    """The inbox puts a message it cannot read aside: only the typed path does that."""
    folder = _write_run(tmp_path, _usual_state(), [], {0})
    (folder / "inbox" / "new" / "1700000000001-0000000a.json").write_text("{")
    assert control_body.plain_status_lines(folder, _NOW_MS) is None


def test_a_long_log_is_left_to_the_typed_path(tmp_path: Path) -> None:
    events = [{"type": "stagnation", "ts": _START, "runId": _RUN, "pad": "x" * 1000}] * 300
    folder = _write_run(tmp_path, _usual_state(), events, set())
    assert control_body.plain_status_lines(folder, _NOW_MS) is None
