"""The limits a driver holds a run to: its armed event's, never state.json's alone."""

from __future__ import annotations

from typing import Any

from autopilot.config import RunConfig
from autopilot.core.structs import replace
from autopilot.loop.armed_limits import (
    LIMIT_FIELDS,
    changed_limits,
    limits_of,
    logged_limits,
    stricter_limits,
)

RUN = "run-1"


def _armed(config: RunConfig, **fields: Any) -> dict[str, Any]:
    return {"type": "armed", "ts": 1, "runId": RUN, "limits": limits_of(config), **fields}


def _extended(value: int) -> dict[str, Any]:
    return {"type": "budget_extended", "ts": 2, "runId": RUN, "maxIterations": value}


def test_the_armed_limits_replace_the_state_files() -> None:
    armed = RunConfig(max_iterations=3, max_cost_usd=1.5, max_tokens=1000)
    raised = RunConfig(max_iterations=8, max_cost_usd=None, max_tokens=10**9, stagnation_limit=0)
    held = logged_limits([_armed(armed)], RUN, raised)
    assert isinstance(held, RunConfig)
    assert (held.max_iterations, held.max_cost_usd, held.max_tokens) == (3, 1.5, 1000)
    assert held.stagnation_limit == armed.stagnation_limit
    assert changed_limits(raised, held) == [
        "max_iterations",
        "max_cost_usd",
        "max_tokens",
        "stagnation_limit",
    ]


def test_an_extension_counts_in_a_self_improve_run_up_to_its_ceiling_only() -> None:
    armed = RunConfig(max_iterations=3, adaptive_extension=2, adaptive_max_total=6)
    events = [_armed(armed, mode="self-improve"), _extended(5), _extended(50)]
    held = logged_limits(events, RUN, RunConfig(max_iterations=50))
    assert isinstance(held, RunConfig) and held.max_iterations == 6
    prompt_run = logged_limits([_armed(armed, mode="prompt"), _extended(5)], RUN, RunConfig())
    assert isinstance(prompt_run, RunConfig) and prompt_run.max_iterations == 3


def test_a_log_armed_before_limits_were_recorded_gives_its_iteration_bounds() -> None:
    old = {"type": "armed", "ts": 1, "runId": RUN, "maxIterations": 4, "minIterations": 2}
    held = logged_limits([old], RUN, RunConfig(max_iterations=9, max_cost_usd=2.0))
    assert isinstance(held, RunConfig)
    assert (held.max_iterations, held.min_iterations, held.max_cost_usd) == (4, 2, 2.0)


def test_bad_values_in_the_armed_limits_are_left_out() -> None:
    limits = {"max_iterations": "8", "max_tokens": -1, "stagnation_limit": None, "x": 1}
    event = {"type": "armed", "ts": 1, "runId": RUN, "limits": limits}
    held = logged_limits([event], RUN, RunConfig(max_iterations=3, max_tokens=5))
    assert isinstance(held, RunConfig)
    assert (held.max_iterations, held.max_tokens, held.stagnation_limit) == (3, 5, 3)


def test_a_log_that_is_empty_or_begins_otherwise_cannot_tell_the_limits() -> None:
    assert logged_limits([], RUN, RunConfig()) == "the event log is missing or empty"
    other = _armed(RunConfig()) | {"runId": "run-2"}
    start = {"type": "iteration_start", "ts": 1, "runId": RUN, "iteration": 1}
    for first in (other, start):
        found = logged_limits([first, _armed(RunConfig())], RUN, RunConfig())
        assert found == "the event log does not begin with the run's armed event"


# Each limit: (looser, stricter), where looser may be "no limit" (None, or 0 where 0 is off).
LOOSER_STRICTER: dict[str, tuple[Any, Any]] = {
    "max_iterations": (0, 3),
    "max_cost_usd": (None, 1.5),
    "max_tokens": (None, 1000),
    "max_duration_seconds": (None, 60.0),
    "stagnation_limit": (0, 2),
    "max_item_attempts": (0, 2),
    "adaptive_extension": (5, 0),
    "adaptive_max_total": (50, 6),
    "iteration_timeout_seconds": (None, 120.0),
    "idle_timeout_seconds": (None, 30.0),
    "check_timeout_seconds": (600.0, 5.0),
}


def test_every_limit_keeps_the_stricter_of_state_json_and_the_armed_event() -> None:
    assert set(LOOSER_STRICTER) | {"min_iterations"} == set(LIMIT_FIELDS)
    for name, (looser, stricter) in LOOSER_STRICTER.items():
        for logged, on_disk in ((looser, stricter), (stricter, looser)):
            armed = replace(RunConfig(), **{name: logged})
            found = logged_limits([_armed(armed)], RUN, replace(RunConfig(), **{name: on_disk}))
            assert isinstance(found, RunConfig)
            held = stricter_limits(replace(RunConfig(), **{name: on_disk}), found)
            assert getattr(held, name) == stricter, (name, logged, on_disk)


def test_a_positive_limit_is_stricter_than_a_smaller_one_only_when_it_is_smaller() -> None:
    held = stricter_limits(
        RunConfig(max_iterations=50, max_cost_usd=2.0, max_item_attempts=1),
        RunConfig(max_iterations=3, max_cost_usd=5.0, max_item_attempts=4),
    )
    assert (held.max_iterations, held.max_cost_usd, held.max_item_attempts) == (3, 2.0, 1)


def test_the_minimum_iterations_are_the_armed_events_either_way() -> None:
    for on_disk in (1, 9):
        held = stricter_limits(RunConfig(min_iterations=on_disk), RunConfig(min_iterations=4))
        assert held.min_iterations == 4


def test_a_log_armed_before_the_timeouts_were_recorded_keeps_state_jsons() -> None:
    old = _armed(RunConfig())
    for name in ("iteration_timeout_seconds", "idle_timeout_seconds", "check_timeout_seconds"):
        del old["limits"][name]
    on_disk = RunConfig(iteration_timeout_seconds=None, check_timeout_seconds=7.0)
    found = logged_limits([old], RUN, on_disk)
    assert isinstance(found, RunConfig)
    held = stricter_limits(on_disk, found)
    assert (held.iteration_timeout_seconds, held.check_timeout_seconds) == (None, 7.0)
