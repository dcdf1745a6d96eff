"""Adaptive extension of the iteration budget (pure table test)."""

from __future__ import annotations

from typing import Any

import pytest

from autopilot.core.adaptive import Extension, ProgressSignals, adaptive_extension
from autopilot.core.change import LoopState, StateChange
from autopilot.core.policy import PolicyConfig
from autopilot.core.state import LoopCounters, Spend
from autopilot.core.step import conclude

ALL_NEGATIVE = ProgressSignals(False, False, False)


@pytest.mark.parametrize(
    ("max_iterations", "done", "signals", "expected"),
    [
        (10, 9, ProgressSignals(True, True, True), None),
        (10, 10, ALL_NEGATIVE, None),
        (
            10,
            10,
            ProgressSignals(True, False, False),
            Extension(15, "extended to 15 iterations (at most 50): uncommitted changes"),
        ),
        (
            10,
            10,
            ProgressSignals(False, True, True),
            Extension(
                15,
                "extended to 15 iterations (at most 50): recent commits, the answers still differ",
            ),
        ),
        (
            48,
            48,
            ProgressSignals(False, False, True),
            Extension(50, "extended to 50 iterations (at most 50): the answers still differ"),
        ),
        (50, 50, ProgressSignals(True, True, True), None),
        (0, 100, ProgressSignals(True, True, True), None),
    ],
)
def test_adaptive_extension(
    max_iterations: int, done: int, signals: ProgressSignals, expected: Extension | None
) -> None:
    assert (
        adaptive_extension(max_iterations=max_iterations, iterations_done=done, signals=signals)
        == expected
    )


def _attempt(*, dirty: bool = False, commits: int = 0, final: str = "did a step") -> Any:
    from autopilot.core.attempt import Attempt, CommitSeen
    from autopilot.core.vocabulary import EndedBy, Progress

    return Attempt(
        number=2,
        folder="iter-0002",
        prompt="improve",
        ended_by=EndedBy.EXIT,
        result_seen=True,
        final_message=final,
        tool_calls=1,
        progress=Progress.MADE if dirty or commits else Progress.NONE,
        uncommitted_changes=dirty,
        commits=tuple(CommitSeen(f"{n:040x}", "c") for n in range(commits)),
    )


SELF_IMPROVE = PolicyConfig(max_iterations=2, adaptive_extension=3, adaptive_max_total=6)


def _after_second(config: PolicyConfig, attempt: Any, previous_digest: str | None = None) -> Any:
    state = LoopState(
        spend=Spend(iterations=1),
        counters=LoopCounters(last_response_digest=previous_digest),
    )
    return conclude(state, attempt, config, 1_000)


@pytest.mark.parametrize(
    ("attempt", "previous", "ceiling"),
    [
        (_attempt(dirty=True), None, 5),
        (_attempt(commits=1), None, 5),
        # The answers differ from the last one: work still moves.
        (_attempt(), "sha256:other", 5),
        # Every signal negative: a clean tree, no commit, the same answer again.
        (_attempt(), None, None),
    ],
)
def test_conclude_extends_a_self_improve_budget_only_on_a_positive_signal(
    attempt: Any, previous: str | None, ceiling: int | None
) -> None:
    step = _after_second(SELF_IMPROVE, attempt, previous)
    extended = [e for e in step.events if e.type.value == "budget_extended"]
    if ceiling is None:
        assert step.ending is not None and step.ending.reason == "max_iterations"
        assert extended == [] and step.change.max_iterations is None
        return
    assert step.ending is None and step.change.max_iterations == ceiling
    assert [e.fields["maxIterations"] for e in extended] == [ceiling]
    assert str(extended[0].fields["note"]).startswith(f"extended to {ceiling} iterations")
    assert step.change.to_json()["maxIterations"] == ceiling
    assert StateChange.from_json(step.change.to_json()).max_iterations == ceiling


def test_no_extension_without_adaptive_or_above_the_total() -> None:
    plain = PolicyConfig(max_iterations=2)
    assert _after_second(plain, _attempt(dirty=True)).ending is not None
    at_total = PolicyConfig(max_iterations=6, adaptive_extension=3, adaptive_max_total=6)
    state = LoopState(spend=Spend(iterations=5))
    assert conclude(state, _attempt(dirty=True), at_total, 1_000).ending is not None
