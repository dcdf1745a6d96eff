"""The limits a driver holds a run to: its armed event's, never state.json's alone."""

from __future__ import annotations

from typing import Any

from autopilot.config import RunConfig
from autopilot.loop.armed_limits import changed_limits, limits_of, logged_limits

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
