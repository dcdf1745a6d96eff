"""Adaptive extension of the iteration budget (pure table test)."""

from __future__ import annotations

import pytest

from autopilot.core.adaptive import Extension, ProgressSignals, adaptive_extension

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
