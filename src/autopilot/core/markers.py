"""Progress markers in the root agent's text, as the log's stage events (pure;
``docs/formats.md``).

An agent may say where it is with a marker alone on a line:

=====================================  ==============================================
``[STAGE_PLAN: ORIENT, IMPLEMENT, TEST]``  ``stage_plan`` (also a JSON list, or
                                           ``{"stages": [...]}``)
``[STAGE: IMPLEMENT]``                     ``stage_end`` for the open stage (outcome
                                           ``ok``), then ``stage_start``
``[TASK_START: add the parser test]``      ``task_start`` in the open stage, ``sub``
                                           counting from 1 (or ``{"stage", "sub",
                                           "desc"}``)
``[TASK_END: ok]``                         ``task_end`` of the open task: ``ok``,
                                           ``fail`` or ``skip`` (or ``{"outcome"}``)
=====================================  ==============================================

``stage_start``/``stage_end`` carry the 1-based ``stage`` ordinal (the stage's place in
the plan, else the order it started in) and ``stageName``, as the log's fold reads them.
Markers inside a fenced code block are examples, not markers. ``finish_markers`` closes
what the iteration left open (a final ``stage_end`` for the open stage).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from msgspec import Struct, field

from autopilot.core.structs import replace

MAX_STAGES = 64
MAX_STAGE_NAME_CHARS = 64
MAX_DESC_CHARS = 500
TASK_OUTCOMES = ("ok", "fail", "skip")

_MARKER_RE = re.compile(r"^\[(STAGE_PLAN|STAGE|TASK_START|TASK_END):\s*(.*?)\s*\]$")
_FENCE_RE = re.compile(r"^(```|~~~)")


class MarkerState(Struct, frozen=True):
    """Where an iteration's markers have got to.

    Attributes:
        plan: The stages of the newest ``stage_plan``.
        stage: The open stage's name, or None.
        stage_number: The open stage's ordinal (0 when none is open).
        started: How many stages have started in this iteration.
        task_sub: The open task's ``sub``, or None.
        subs: The last ``sub`` used per stage name.
    """

    plan: tuple[str, ...] = ()
    stage: str | None = None
    stage_number: int = 0
    started: int = 0
    task_sub: int | None = None
    subs: Mapping[str, int] = field(default_factory=dict)


def _name(text: str) -> str:
    return " ".join(text.split())[:MAX_STAGE_NAME_CHARS]


def _payload(raw: str) -> Any:
    if raw[:1] in '[{"':
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _stage_list(raw: str) -> list[str]:
    value = _payload(raw)
    if isinstance(value, Mapping):
        value = value.get("stages")
    if isinstance(value, str):
        value = re.split(r"\s*(?:,|->|→|\|)\s*", value)
    if not isinstance(value, list):
        return []
    stages = [_name(s) for s in value if isinstance(s, str) and s.strip()]
    return stages[:MAX_STAGES]


def scan_markers(state: MarkerState, text: str) -> tuple[MarkerState, list[dict[str, Any]]]:
    """Find the markers in one piece of root agent text.

    Args:
        state: Where the iteration's markers had got to.
        text: A root assistant message (never a subagent's or a tool's output).

    Returns:
        The new state and the events (each with ``type``; no ``ts``/``runId``).
    """
    events: list[dict[str, Any]] = []
    fenced = False
    for line in text.splitlines():
        stripped = line.strip()
        if _FENCE_RE.match(stripped):
            fenced = not fenced
            continue
        match = None if fenced else _MARKER_RE.match(stripped)
        if match is None:
            continue
        key, raw = match.group(1), match.group(2)
        if key == "STAGE_PLAN":
            stages = _stage_list(raw)
            if stages:
                state = replace(state, plan=tuple(stages))
                events.append({"type": "stage_plan", "stages": stages})
        elif key == "STAGE":
            state = _stage(state, raw, events)
        elif key == "TASK_START":
            state = _task_start(state, raw, events)
        else:
            state = _task_end(state, raw, events)
    return state, events


def _close_stage(state: MarkerState, outcome: str, events: list[dict[str, Any]]) -> MarkerState:
    if state.stage is None:
        return state
    state = _close_task(state, "skip", events)
    events.append(
        {
            "type": "stage_end",
            "stage": state.stage_number,
            "stageName": state.stage,
            "outcome": outcome,
        }
    )
    return replace(state, stage=None, stage_number=0)


def _close_task(state: MarkerState, outcome: str, events: list[dict[str, Any]]) -> MarkerState:
    if state.task_sub is None:
        return state
    events.append(
        {
            "type": "task_end",
            "stage": state.stage or "TASK",
            "sub": state.task_sub,
            "outcome": outcome,
        }
    )
    return replace(state, task_sub=None)


def _stage(state: MarkerState, raw: str, events: list[dict[str, Any]]) -> MarkerState:
    value = _payload(raw)
    if isinstance(value, Mapping):
        value = value.get("stage") or value.get("name")
    if not isinstance(value, str) or not value.strip():
        return state
    name = _name(value)
    state = _close_stage(state, "ok", events)
    started = state.started + 1
    number = state.plan.index(name) + 1 if name in state.plan else started
    events.append({"type": "stage_start", "stage": number, "stageName": name})
    return replace(state, stage=name, stage_number=number, started=started)


def _task_start(state: MarkerState, raw: str, events: list[dict[str, Any]]) -> MarkerState:
    value = _payload(raw)
    stage = state.stage or "TASK"
    sub: int | None = None
    if isinstance(value, Mapping):
        if isinstance(value.get("stage"), str) and value["stage"].strip():
            stage = _name(value["stage"])
        given = value.get("sub")
        if isinstance(given, int) and not isinstance(given, bool) and given >= 1:
            sub = given
        value = value.get("desc")
    desc = " ".join(value.split())[:MAX_DESC_CHARS] if isinstance(value, str) else ""
    state = _close_task(state, "skip", events)
    sub = sub if sub is not None else state.subs.get(stage, 0) + 1
    events.append({"type": "task_start", "stage": stage, "sub": sub, "desc": desc})
    return replace(state, task_sub=sub, subs={**state.subs, stage: sub})


def _task_end(state: MarkerState, raw: str, events: list[dict[str, Any]]) -> MarkerState:
    value = _payload(raw)
    if isinstance(value, Mapping):
        value = value.get("outcome")
    word = value.split()[0].lower() if isinstance(value, str) and value.split() else "ok"
    return _close_task(state, word if word in TASK_OUTCOMES else "ok", events)


def finish_markers(state: MarkerState, *, ok: bool) -> tuple[MarkerState, list[dict[str, Any]]]:
    """Close the open task and stage at the end of an iteration.

    Args:
        state: The iteration's marker state.
        ok: Whether the iteration ended well (the stage's outcome is ``ok`` or ``fail``).

    Returns:
        A fresh state for the next iteration (the plan is kept) and the events.
    """
    events: list[dict[str, Any]] = []
    state = _close_task(state, "ok" if ok else "fail", events)
    state = _close_stage(state, "ok" if ok else "fail", events)
    return MarkerState(plan=state.plan), events
