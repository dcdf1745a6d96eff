"""The loop counters in ``state.json`` (``spend`` and ``loop``) as the policy sees them.

They live in ``state.json`` so budgets and streaks hold across a crash and a restart
of the driver (field report 11).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autopilot.loop.policy import Action, Counters, Decision


def counters_from_state(state: dict[str, Any], *, interrupted: bool = False) -> Counters:
    """The policy's ``Counters`` from a ``state.json`` object.

    Args:
        state: The run's state.
        interrupted: A signal asked for a stop (counts as a stop request).
    """
    spend = state.get("spend") or {}
    loop = state.get("loop") or {}
    tokens = spend.get("tokens") or {}
    return Counters(
        iterations_done=int(spend.get("iterations") or 0),
        stagnation_streak=int(loop.get("stagnationStreak") or 0),
        last_response_digest=loop.get("lastResponseDigest"),
        failure_streak=int(loop.get("failureStreak") or 0),
        last_failure_signature=loop.get("lastFailureSignature"),
        rate_limit_waits=int(loop.get("rateLimitWaits") or 0),
        cost_usd=float(spend.get("costUsd") or 0.0),
        tokens=int(tokens.get("input") or 0) + int(tokens.get("output") or 0),
        active_ms=int(spend.get("activeMs") or 0),
        stop_requested=bool(state.get("stopRequested")) or interrupted,
        pause_requested=bool(state.get("paused")),
    )


def counter_change(decision: Decision, signature: str | None) -> Callable[[dict[str, Any]], None]:
    """The change to ``state.json``'s loop counters that ``decision`` implies."""

    def change(s: dict[str, Any]) -> None:
        loop = s.setdefault("loop", {})
        loop["stagnationStreak"] = decision.stagnation_streak
        loop["failureStreak"] = decision.failure_streak
        loop["lastFailureSignature"] = signature if decision.failure_streak else None
        loop["lastResponseDigest"] = decision.response_digest
        waits = int(loop.get("rateLimitWaits") or 0)
        loop["rateLimitWaits"] = waits + 1 if decision.action is Action.WAIT else 0

    return change
