"""The budgets a run was armed with, held against a ``state.json`` or an event log
someone else rewrote.

The agent can write into its run folder: both ``state.json`` and the ``armed`` event
(line 1 of ``events.jsonl``, written when the run was armed, before any agent ran;
raised only by the ``budget_extended`` events a self-improve run earns). Where the
two disagree, a driver and the Stop hook hold the run to the stricter of each limit
(``LIMIT_FIELDS``; ``stricter_limits``), so a limit an agent lowered costs nothing and
one it raised in either file is refused (``docs/formats.md``, "Who writes what"). A
log that is missing, or does not begin with the run's ``armed`` event, leaves the
budgets unknown: the run ends (reason ``tampered``) rather than spend on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from autopilot.config import RunConfig
from autopilot.core.structs import replace
from autopilot.core.vocabulary import EventType
from autopilot.loop.record import RunRecord
from autopilot.store.run_state import RunState

LIMIT_FIELDS = (
    "max_iterations",
    "min_iterations",
    "max_cost_usd",
    "max_tokens",
    "max_duration_seconds",
    "stagnation_limit",
    "max_item_attempts",
    "adaptive_extension",
    "adaptive_max_total",
    "iteration_timeout_seconds",
    "idle_timeout_seconds",
    "check_timeout_seconds",
)
"""The ``RunConfig`` fields that bound a run's spend, recorded in its ``armed`` event."""

_OPTIONAL = frozenset(
    {
        "max_cost_usd",
        "max_tokens",
        "max_duration_seconds",
        "iteration_timeout_seconds",
        "idle_timeout_seconds",
    }
)
"""Limits that may be ``None``: off, the loosest value."""

_WHOLE = frozenset(
    {
        "max_iterations",
        "min_iterations",
        "max_tokens",
        "stagnation_limit",
        "max_item_attempts",
        "adaptive_extension",
        "adaptive_max_total",
    }
)
"""Limits that are whole numbers."""

_ZERO_IS_OFF = frozenset(
    {"max_iterations", "max_duration_seconds", "stagnation_limit", "max_item_attempts"}
)
"""Limits whose 0 is off (no limit), the loosest value."""

_ARMED_STANDS = frozenset({"min_iterations"})
"""Limits that are no budget: a lower ``min_iterations`` honours a promise sooner, a
higher one spends more, so either change would serve an agent; the armed value stands."""

SELF_IMPROVE_MODE = "self-improve"
"""The only mode whose iteration budget the driver extends (``core.adaptive``)."""


def limits_of(config: RunConfig) -> dict[str, Any]:
    """The ``limits`` object of an ``armed`` event: ``LIMIT_FIELDS`` of ``config``
    (``None``: off; ``max_iterations`` 0: unlimited)."""
    return {name: getattr(config, name) for name in LIMIT_FIELDS}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _valid(name: str, value: Any) -> bool:
    if value is None:
        return name in _OPTIONAL
    if not _number(value) or value < 0:
        return False
    return isinstance(value, int) or name not in _WHOLE


def logged_limits(
    events: Iterable[Mapping[str, Any]], run_id: str, config: RunConfig
) -> RunConfig | str:
    """``config`` with the limits the run's log holds (pure).

    The first event must be the run's ``armed``: its ``limits`` (``limits_of``; a
    log armed before they were recorded gives ``maxIterations`` and
    ``minIterations`` only, the others stay as ``config`` has them). A
    ``budget_extended`` event raises ``max_iterations`` in a self-improve run armed
    with extensions, never above its ``adaptive_max_total``.

    Returns:
        The config, or why the log cannot tell the limits (no events, or a first
        event that is not this run's ``armed``).
    """
    armed: Mapping[str, Any] | None = None
    extended: int | None = None
    for event in events:
        if armed is None:
            if event.get("type") != EventType.ARMED or event.get("runId") != run_id:
                return "the event log does not begin with the run's armed event"
            armed = event
        elif event.get("type") == EventType.BUDGET_EXTENDED:
            value = event.get("maxIterations")
            if isinstance(value, int) and not isinstance(value, bool):
                extended = value if extended is None else max(extended, value)
    if armed is None:
        return "the event log is missing or empty"
    recorded = armed.get("limits")
    values: dict[str, Any] = dict(recorded) if isinstance(recorded, Mapping) else {}
    if not values:
        values = {"max_iterations": armed.get("maxIterations")}
        values["min_iterations"] = armed.get("minIterations")
    held = {
        name: value
        for name, value in values.items()
        if name in LIMIT_FIELDS and _valid(name, value)
    }
    limited = replace(config, **held)
    if (
        extended is not None
        and armed.get("mode") == SELF_IMPROVE_MODE
        and limited.adaptive_extension > 0
        and limited.max_iterations
    ):
        ceiling = max(limited.max_iterations, min(extended, limited.adaptive_max_total))
        limited = replace(limited, max_iterations=ceiling)
    return limited


def _looseness(name: str, value: Any) -> float:
    """Orders one limit's values, strictest first (off: infinity)."""
    if value is None or (value == 0 and name in _ZERO_IS_OFF):
        return math.inf
    return float(value)


def stricter_limits(on_disk: RunConfig, logged: RunConfig) -> RunConfig:
    """``on_disk`` with each of its ``LIMIT_FIELDS`` the stricter of its own and
    ``logged``'s (pure): the lower number, ``None`` or an off 0 the loosest; on a tie,
    ``logged``'s. ``min_iterations`` is ``logged``'s either way (``_ARMED_STANDS``).

    Args:
        on_disk: The run's ``state.json`` config (``on_disk_limits``).
        logged: The limits its ``armed`` event holds (``logged_limits``).
    """
    held = {}
    for name in LIMIT_FIELDS:
        mine, armed = getattr(on_disk, name), getattr(logged, name)
        stricter = name not in _ARMED_STANDS and _looseness(name, mine) < _looseness(name, armed)
        held[name] = mine if stricter else armed
    return replace(on_disk, **held)


def on_disk_limits(state: RunState) -> RunConfig:
    """``state.json``'s config, its ``max_iterations`` the stricter of its own and the
    file's top-level ``max`` (either can be written by someone else)."""
    config = state.config
    if _looseness("max_iterations", state.max_iterations) < _looseness(
        "max_iterations", config.max_iterations
    ):
        config = replace(config, max_iterations=state.max_iterations)
    return config


def held_config(state: RunState, logged: RunConfig | str) -> RunConfig:
    """The config a run is held to: ``stricter_limits`` of ``state.json``'s
    (``on_disk_limits``) and ``logged``; ``state.json``'s when ``logged`` says why the
    log cannot tell the limits (the run then ends, ``tampered``)."""
    on_disk = on_disk_limits(state)
    return on_disk if isinstance(logged, str) else stricter_limits(on_disk, logged)


def changed_limits(on_disk: RunConfig, held: RunConfig) -> list[str]:
    """The ``LIMIT_FIELDS`` whose values differ between two configs, in order."""
    return [name for name in LIMIT_FIELDS if getattr(on_disk, name) != getattr(held, name)]


def _shown(name: str, value: Any) -> str:
    if value is None:
        return "none: no limit"
    return f"{value}: no limit" if value == 0 and name in _ZERO_IS_OFF else str(value)


def put_back_limits(record: RunRecord, logged: RunConfig) -> RunConfig:
    """Hold the run to the stricter of each limit of ``state.json`` and ``logged``
    (``stricter_limits``): write them into ``state.json`` where it differs (its
    ``config``, ``max`` and ``min``) and, where the two disagreed, say which was kept
    in a ``warning`` (``max_iterations 3 (state.json 3, armed event 50)``).

    Returns:
        The limits held (``state.json``'s config as it now is).
    """
    state = record.state
    on_disk = on_disk_limits(state)
    held = stricter_limits(on_disk, logged)
    disagree = changed_limits(on_disk, logged)
    if (
        changed_limits(state.config, held)
        or state.max_iterations != held.max_iterations
        or state.min_iterations != held.min_iterations
    ):

        def put_back(s: RunState) -> None:
            s.config = replace(s.config, **{name: getattr(held, name) for name in LIMIT_FIELDS})
            s.max_iterations = held.max_iterations
            s.min_iterations = held.min_iterations

        record.update(put_back)
    if disagree:
        shown = ", ".join(
            f"{name} {_shown(name, getattr(held, name))} (state.json "
            f"{_shown(name, getattr(on_disk, name))}, armed event "
            f"{_shown(name, getattr(logged, name))})"
            for name in disagree
        )
        record.emit(
            EventType.WARNING,
            note="state.json's limits differ from the run's armed event; "
            f"the run keeps the stricter of each: {shown}",
        )
    return record.state.config
