"""What a run has spent and counted so far: the part of its state the core decides on.

These values are stored in ``state.json`` (``spend``, ``loop``, ``usageBaseline``;
``docs/formats.md``) and restored on a relaunch, so budgets and streaks hold across
crashes of the driver.
"""

from __future__ import annotations

from msgspec import Struct, field

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


class Tokens(Struct):
    """Input and output tokens."""

    input: int = 0
    output: int = 0

    @property
    def total(self) -> int:
        """Input plus output."""
        return self.input + self.output

    def to_json(self) -> dict[str, int]:
        """``{"input": …, "output": …}``."""
        return {"input": self.input, "output": self.output}


class Spend(Struct):
    """What the run has spent so far; restored on a relaunch so budgets hold.

    Attributes:
        cost_usd: Cost in USD.
        tokens: Tokens.
        active_ms: Wall time of iterations, paused and waiting time excluded.
        waiting_ms: Time spent waiting out usage limits and backoffs.
        iterations: Iterations spent (a retried rate-limited attempt is not one).
    """

    cost_usd: float = 0.0
    tokens: Tokens = field(default_factory=Tokens)
    active_ms: int = 0
    waiting_ms: int = 0
    iterations: int = 0

    def to_json(self) -> dict[str, Any]:
        """``state.json``'s ``spend`` object."""
        return {
            "costUsd": self.cost_usd,
            "tokens": self.tokens.to_json(),
            "activeMs": self.active_ms,
            "waitingMs": self.waiting_ms,
            "iterations": self.iterations,
        }


class LoopCounters(Struct):
    """The policy's streaks, kept so they hold across a relaunch.

    Attributes:
        stagnation_streak: Stagnant iterations in a row.
        last_response_digest: SHA-256 of the previous root response.
        failure_streak: Identical immediate failures in a row.
        last_failure_signature: The previous failure's signature.
        rate_limit_waits: Usage-limit waits in a row.
        last_denial: The previous iteration's permission denial (``tool: command``).
    """

    stagnation_streak: int = 0
    last_response_digest: str | None = None
    failure_streak: int = 0
    last_failure_signature: str | None = None
    rate_limit_waits: int = 0
    last_denial: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``state.json``'s ``loop`` object."""
        return {
            "stagnationStreak": self.stagnation_streak,
            "lastResponseDigest": self.last_response_digest,
            "failureStreak": self.failure_streak,
            "lastFailureSignature": self.last_failure_signature,
            "rateLimitWaits": self.rate_limit_waits,
            "lastDenial": self.last_denial,
        }


class UsageBaseline(Struct, frozen=True):
    """A session's cumulative token totals after the previous iteration (Codex)."""

    session_id: str
    input_tokens: int
    output_tokens: int
