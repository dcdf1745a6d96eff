"""The spend of a parallel run's lanes, checked against one budget (pure)."""

from __future__ import annotations

from autopilot.core.spend import shared
from autopilot.core.state import Spend, Tokens


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
