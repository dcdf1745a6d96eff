"""The budgets a run was armed with, held against a ``state.json`` someone else rewrote.

The agent can write into its run folder. A driver therefore takes a run's limits
(``LIMIT_FIELDS``) from the run's ``armed`` event — written when the run was armed,
before any agent ran — raised only by the ``budget_extended`` events a self-improve
run earns, never from ``state.json`` alone (``docs/formats.md``, "Crash recovery").
A log that is missing, or does not begin with the run's ``armed`` event, leaves the
budgets unknown: the run ends (reason ``tampered``) rather than spend on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from autopilot.config import RunConfig
from autopilot.core.vocabulary import EventType
from autopilot.loop.record import RunRecord
from autopilot.store.events import read_events
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
)
"""The ``RunConfig`` fields that bound a run's spend, recorded in its ``armed`` event."""

SELF_IMPROVE_MODE = "self-improve"
"""The only mode whose iteration budget the driver extends (``core.adaptive``)."""


def limits_of(config: RunConfig) -> dict[str, Any]:
    """The ``limits`` object of an ``armed`` event: ``LIMIT_FIELDS`` of ``config``
    (``None``: off; ``max_iterations`` 0: unlimited)."""
    return {name: getattr(config, name) for name in LIMIT_FIELDS}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _valid(name: str, value: Any, default: Any) -> bool:
    if value is None:
        return default is None or name in ("max_cost_usd", "max_tokens", "max_duration_seconds")
    if not _number(value) or value < 0:
        return False
    return isinstance(value, int) or not isinstance(default, int)


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
    defaults = RunConfig()
    held = {
        name: value
        for name, value in values.items()
        if name in LIMIT_FIELDS and _valid(name, value, getattr(defaults, name))
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


def held_limits(events_path: Path, run_id: str, config: RunConfig) -> RunConfig | str:
    """``logged_limits`` of the log at ``events_path`` (read in one pass)."""
    return logged_limits(read_events(events_path), run_id, config)


def changed_limits(on_disk: RunConfig, held: RunConfig) -> list[str]:
    """The ``LIMIT_FIELDS`` whose values differ between two configs, in order."""
    return [name for name in LIMIT_FIELDS if getattr(on_disk, name) != getattr(held, name)]


def put_back_limits(record: RunRecord, held: RunConfig) -> None:
    """Write ``held``'s limits back into ``state.json`` where it differs (its
    ``config`` and ``max``), saying which were put back in a ``warning``."""
    state = record.state
    changed = changed_limits(state.config, held)
    if state.max_iterations != held.max_iterations and "max_iterations" not in changed:
        changed.insert(0, "max_iterations")
    if not changed:
        return
    found = {**{name: getattr(state.config, name) for name in LIMIT_FIELDS}}
    if state.max_iterations != held.max_iterations:
        found["max_iterations"] = state.max_iterations
    shown = ", ".join(f"{name} {found[name]} -> {getattr(held, name)}" for name in changed)

    def put_back(s: RunState) -> None:
        s.config = replace(s.config, **{name: getattr(held, name) for name in LIMIT_FIELDS})
        s.max_iterations = held.max_iterations
        s.min_iterations = held.min_iterations

    record.update(put_back)
    record.emit(
        EventType.WARNING,
        note=f"state.json's limits differ from the run's armed event; put back: {shown}",
    )
