"""A run's spend against its budgets: the lanes of a parallel run share one, and a
budget used up at the boundary ends the run with its note (pure)."""

from __future__ import annotations

from autopilot.core.policy import PolicyConfig
from autopilot.core.spend import shared
from autopilot.core.state import Spend, Tokens
from autopilot.core.step import budget_ending
from autopilot.core.vocabulary import Reason


def test_lanes_share_one_spend() -> None:
    own = Spend(cost_usd=0.5, tokens=Tokens(100, 10), active_ms=4_000, iterations=2)
    others = [
        Spend(cost_usd=0.25, tokens=Tokens(50, 5), active_ms=9_000, waiting_ms=7, iterations=1),
        Spend(cost_usd=0.125, tokens=Tokens(1, 1), active_ms=1_000, iterations=3),
    ]
    total = shared(own, others)
    assert total == Spend(
        cost_usd=0.875, tokens=Tokens(151, 16), active_ms=9_000, waiting_ms=7, iterations=6
    )
    assert shared(own, []) == own


def test_a_budget_used_up_at_the_boundary_ends_the_run_with_its_note() -> None:
    config = PolicyConfig(max_iterations=3, max_cost_usd=1.0)
    spent = Spend(cost_usd=0.5, tokens=Tokens(10, 1), active_ms=0, iterations=3)
    found = budget_ending(spent, config, iteration_open=False, lanes=False, restored=False)
    assert found == (Reason.MAX_ITERATIONS, "reached max_iterations=3")
    # A retry of an open iteration spends none: only the spend budgets count then.
    assert budget_ending(spent, config, iteration_open=True, lanes=False, restored=True) is None
    costly = Spend(cost_usd=1.5, tokens=Tokens(10, 1), active_ms=0, iterations=1)
    assert budget_ending(costly, config, iteration_open=True, lanes=False, restored=True) == (
        Reason.MAX_COST,
        "reached max_cost=$1 (spend restored from state.json)",
    )
    assert budget_ending(costly, config, iteration_open=False, lanes=True, restored=True) == (
        Reason.MAX_COST,
        "reached max_cost=$1 (every lane's spend)",
    )
