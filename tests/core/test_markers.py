"""Progress markers in the root agent's text become seed events (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from autopilot.core.markers import MarkerState, finish_markers, scan_markers
from autopilot.store.events import serialize_event
from autopilot.store.fold import fold


def _scan(*texts: str) -> tuple[MarkerState, list[dict[str, Any]]]:
    state = MarkerState()
    events: list[dict[str, Any]] = []
    for text in texts:
        state, found = scan_markers(state, text)
        events.extend(found)
    return state, events


def test_a_plan_stages_and_tasks() -> None:
    state, events = _scan(
        "Plan first.\n[STAGE_PLAN: ORIENT, IMPLEMENT, TEST]\n[STAGE: ORIENT]\nreading",
        "[STAGE: IMPLEMENT]\n[TASK_START: add the parser]\nwork\n[TASK_END: ok]\n"
        "[TASK_START: wire it]",
        "  [TASK_END: fail]  \n[STAGE: TEST]",
    )
    assert events == [
        {"type": "stage_plan", "stages": ["ORIENT", "IMPLEMENT", "TEST"]},
        {"type": "stage_start", "stage": 1, "stageName": "ORIENT"},
        {"type": "stage_end", "stage": 1, "stageName": "ORIENT", "outcome": "ok"},
        {"type": "stage_start", "stage": 2, "stageName": "IMPLEMENT"},
        {"type": "task_start", "stage": "IMPLEMENT", "sub": 1, "desc": "add the parser"},
        {"type": "task_end", "stage": "IMPLEMENT", "sub": 1, "outcome": "ok"},
        {"type": "task_start", "stage": "IMPLEMENT", "sub": 2, "desc": "wire it"},
        {"type": "task_end", "stage": "IMPLEMENT", "sub": 2, "outcome": "fail"},
        {"type": "stage_end", "stage": 2, "stageName": "IMPLEMENT", "outcome": "ok"},
        {"type": "stage_start", "stage": 3, "stageName": "TEST"},
    ]
    state, closing = finish_markers(state, ok=True)
    assert closing == [{"type": "stage_end", "stage": 3, "stageName": "TEST", "outcome": "ok"}]
    assert state == MarkerState(plan=("ORIENT", "IMPLEMENT", "TEST"))


@pytest.mark.parametrize(
    ("line", "stages"),
    [
        ('[STAGE_PLAN: ["A", "B"]]', ["A", "B"]),
        ('[STAGE_PLAN: {"stages": ["A", " ", 3, "B"]}]', ["A", "B"]),
        ("[STAGE_PLAN: A -> B -> C]", ["A", "B", "C"]),
        ("[STAGE_PLAN: ]", None),
    ],
)
def test_plan_forms(line: str, stages: list[str] | None) -> None:
    _, events = _scan(line)
    assert events == ([{"type": "stage_plan", "stages": stages}] if stages else [])


def test_json_forms_of_tasks_and_stages() -> None:
    _, events = _scan(
        '[STAGE: {"stage": "BUILD"}]\n[TASK_START: {"stage": "BUILD", "sub": 4, "desc": "x"}]\n'
        '[TASK_END: {"outcome": "skip"}]'
    )
    assert events[1:] == [
        {"type": "task_start", "stage": "BUILD", "sub": 4, "desc": "x"},
        {"type": "task_end", "stage": "BUILD", "sub": 4, "outcome": "skip"},
    ]


def test_markers_not_alone_on_a_line_or_in_code_are_ignored() -> None:
    _, events = _scan(
        "I will emit [STAGE: X] later.\n```\n[STAGE: EXAMPLE]\n```\n> [STAGE: QUOTED]\n"
        "[TASK_END: ok]"
    )
    assert events == []


def test_a_stage_off_the_plan_is_numbered_by_its_start_order() -> None:
    _, events = _scan("[STAGE_PLAN: A, B]\n[STAGE: A]\n[STAGE: EXTRA]")
    assert events[-1] == {"type": "stage_start", "stage": 2, "stageName": "EXTRA"}


def test_a_failed_iteration_closes_its_task_and_stage_as_failed() -> None:
    state, _ = _scan("[STAGE: FIX]\n[TASK_START: patch]")
    _, events = finish_markers(state, ok=False)
    assert events == [
        {"type": "task_end", "stage": "FIX", "sub": 1, "outcome": "fail"},
        {"type": "stage_end", "stage": 1, "stageName": "FIX", "outcome": "fail"},
    ]


def test_long_names_are_cut_and_the_events_fold() -> None:
    _, events = _scan(f"[STAGE: {'S' * 100}]\n[TASK_START: {'d' * 900}]")
    assert len(events[0]["stageName"]) == 64
    assert len(events[1]["desc"]) == 500
    lines = [
        {"type": "iteration_start", "ts": 1, "runId": "r-1", "iteration": 1},
        *({**e, "ts": 2 + n, "runId": "r-1", "iteration": 1} for n, e in enumerate(events)),
    ]
    assert all(serialize_event(e) for e in lines)
    snap = fold(lines)
    assert snap.activeStage is not None and snap.activeStage["name"] == "S" * 64
    assert snap.taskInFlight is not None and snap.taskInFlight["sub"] == 1
