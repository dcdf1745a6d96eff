"""The values around ``conclude``: the run before an attempt (``LoopState``), the run
after it (``StateChange``), how a run ends (``Ending``) and an event to append."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec import Struct, field

from autopilot.core.ending import exit_code_for
from autopilot.core.state import LoopCounters, Spend, Tokens, UsageBaseline
from autopilot.core.vocabulary import EventType, RunStatus

SESSION_ID_EVENT_MAX_CHARS = 64
"""The seed's reader keeps a ``sessionId`` of at most 64 characters."""


class LoopState(Struct, frozen=True):
    """What ``conclude`` reads of the run as it was before the attempt.

    Attributes:
        spend: Spend so far.
        counters: The policy's streaks so far.
        session_id: The stored session (``--continue``), if any.
        usage_baseline: Session totals after the previous iteration (Codex).
        continue_session: The run resumes one session (``--continue``).
        stop_requested: A stop is pending (flag, ``stop --now`` or a signal).
        stop_note: Why, in words, for the terminal event.
        pause_requested: A pause is pending.
        agent: The agent's name; model: the model asked for (for notes).
    """

    spend: Spend = field(default_factory=Spend)
    counters: LoopCounters = field(default_factory=LoopCounters)
    session_id: str | None = None
    usage_baseline: UsageBaseline | None = None
    continue_session: bool = False
    stop_requested: bool = False
    stop_note: str = "stop requested"
    pause_requested: bool = False
    agent: str = "agent"
    model: str | None = None


class Ending(Struct, frozen=True):
    """How the run ends: its terminal event, reason, note, status and exit code."""

    event: EventType
    reason: str
    note: str | None
    status: RunStatus
    exit_code: int


class StateChange(Struct, frozen=True):
    """The run's state after the step: what ``RunState.absorb`` writes.

    Also the ``change`` of the step's ``decision_applied`` event, so recovery can
    apply a step whose state write a crash prevented.

    ``messages_stand`` is False when the messages handed to the attempt must be
    handed again to the next one: the same iteration is retried, or a crash of the
    driver cut the attempt short.
    ``max_iterations`` is the new iteration budget when the step extended it
    (``core.adaptive``), else None.
    """

    iteration: int
    iteration_open: bool
    spend: Spend
    counters: LoopCounters
    session_id: str | None
    usage_baseline: UsageBaseline | None
    ending: Ending | None = None
    messages_stand: bool = True
    gate: str | None = None
    max_iterations: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``change`` object of ``decision_applied``."""
        baseline = self.usage_baseline
        ending = self.ending
        return {
            "iter": self.iteration,
            "iterationOpen": self.iteration_open,
            "spend": self.spend.to_json(),
            "loop": self.counters.to_json(),
            "sessionId": self.session_id,
            "usageBaseline": None
            if baseline is None
            else [baseline.session_id, baseline.input_tokens, baseline.output_tokens],
            "ending": None
            if ending is None
            else [ending.event.value, ending.reason, ending.note, ending.status.value],
            "messagesStand": self.messages_stand,
            "gate": self.gate,
            "maxIterations": self.max_iterations,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StateChange:
        """Rebuild from ``to_json``.

        Raises:
            ValueError: ``data`` is not such an object.
        """
        try:
            spend, loop = data["spend"], data["loop"]
            tokens = spend["tokens"]
            baseline, ending = data.get("usageBaseline"), data.get("ending")
            return cls(
                iteration=int(data["iter"]),
                iteration_open=bool(data["iterationOpen"]),
                spend=Spend(
                    float(spend["costUsd"]),
                    Tokens(int(tokens["input"]), int(tokens["output"])),
                    int(spend["activeMs"]),
                    int(spend["waitingMs"]),
                    int(spend["iterations"]),
                ),
                counters=LoopCounters(
                    int(loop["stagnationStreak"]),
                    loop.get("lastResponseDigest"),
                    int(loop["failureStreak"]),
                    loop.get("lastFailureSignature"),
                    int(loop["rateLimitWaits"]),
                    loop.get("lastDenial"),
                ),
                session_id=data.get("sessionId"),
                usage_baseline=None
                if baseline is None
                else UsageBaseline(str(baseline[0]), int(baseline[1]), int(baseline[2])),
                ending=None
                if ending is None
                else Ending(
                    EventType(ending[0]),
                    str(ending[1]),
                    ending[2],
                    RunStatus(ending[3]),
                    exit_code_for(ending[0], str(ending[1])),
                ),
                messages_stand=bool(data.get("messagesStand", True)),
                gate=data["gate"] if isinstance(data.get("gate"), str) else None,
                max_iterations=_count(data.get("maxIterations")),
            )
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise ValueError(f"not a state change: {error}") from None


class Event(Struct, frozen=True):
    """An event to append: its type and fields (``ts`` and ``runId`` are the log's)."""

    type: EventType
    fields: Mapping[str, Any]


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
