"""Spend accounting: what an attempt adds to a run's spend, and which record wins.

Every attempt is charged its tokens, cost and wall time, also one that hit a usage
limit or failed (spend budgets hold through them); only an attempt that is not
retried spends an iteration.
"""

from __future__ import annotations

from collections.abc import Sequence

from autopilot.core.attempt import Attempt
from autopilot.core.state import Spend, Tokens


def charge(spend: Spend, attempt: Attempt, *, spends_iteration: bool) -> Spend:
    """``spend`` with ``attempt``'s tokens, cost and time added.

    Args:
        spend: The run's spend before the attempt.
        attempt: The attempt (its numbers already checked for sanity).
        spends_iteration: The attempt counts against the iteration budget.

    Returns:
        A new ``Spend``; ``cost_usd`` is rounded to 10^-6 USD.
    """
    return Spend(
        cost_usd=round(spend.cost_usd + (attempt.cost_usd or 0.0), 6),
        tokens=Tokens(
            spend.tokens.input + (attempt.input_tokens or 0),
            spend.tokens.output + (attempt.output_tokens or 0),
        ),
        active_ms=spend.active_ms + attempt.duration_ms,
        waiting_ms=spend.waiting_ms,
        iterations=spend.iterations + (1 if spends_iteration else 0),
    )


def larger(first: Spend, second: Spend) -> Spend:
    """Each figure at the larger of two records of the same run's spend.

    On a relaunch the driver compares ``state.json`` with the event log (whose
    ``iteration_end`` lines carry cumulative figures): a record rewritten by
    someone else can only raise the spend, never lower it.
    """
    return Spend(
        cost_usd=max(first.cost_usd, second.cost_usd),
        tokens=Tokens(
            max(first.tokens.input, second.tokens.input),
            max(first.tokens.output, second.tokens.output),
        ),
        active_ms=max(first.active_ms, second.active_ms),
        waiting_ms=max(first.waiting_ms, second.waiting_ms),
        iterations=max(first.iterations, second.iterations),
    )


def shared(own: Spend, others: Sequence[Spend]) -> Spend:
    """The spend of a parallel run whose lanes share one budget: ``own`` (this lane)
    plus every other lane's cost, tokens and iterations; the active and waiting time
    are the longest lane's (lanes work at the same time)."""
    lanes = (own, *others)
    return Spend(
        cost_usd=round(sum(s.cost_usd for s in lanes), 6),
        tokens=Tokens(sum(s.tokens.input for s in lanes), sum(s.tokens.output for s in lanes)),
        active_ms=max(s.active_ms for s in lanes),
        waiting_ms=max(s.waiting_ms for s in lanes),
        iterations=sum(s.iterations for s in lanes),
    )


def cut_short_ms(
    started_ms: int | None,
    last_written_ms: int | None,
    now_ms: int,
    *,
    outlived: bool,
    heartbeat_ms: int,
) -> int:
    """The active time charged to an attempt whose driver died (ms), never less than
    it really ran.

    From its start to the moment recovery runs when its processes outlived the
    driver (recovery had to end them) or nothing of it is known; otherwise to the
    last write of its raw output plus two heartbeats (the driver touches that file
    every heartbeat while the agent runs, and the agent dies with the driver; a
    loop turn can take a little longer than a beat), and never past the moment
    recovery runs. ``docs/formats.md`` ("Crash recovery") states the rule.

    Args:
        started_ms: Its ``iteration_start`` (epoch ms), None if unknown (then 0).
        last_written_ms: The latest modification of its raw stdout or stderr
            (epoch ms), None if neither exists.
        now_ms: When recovery runs (epoch ms).
        outlived: Recovery ended processes the attempt left running.
        heartbeat_ms: How often the driver touches the raw stdout.
    """
    if started_ms is None:
        return 0
    if outlived or last_written_ms is None:
        ended_ms = now_ms
    else:
        ended_ms = min(now_ms, max(last_written_ms, started_ms) + 2 * heartbeat_ms)
    return max(0, ended_ms - started_ms)
