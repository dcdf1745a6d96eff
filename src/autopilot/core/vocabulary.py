"""autopilot's closed vocabulary: one ``StrEnum`` per concept, used as the JSON value.

The values are what ``state.json`` and ``events.jsonl`` hold (``docs/formats.md``);
a name is never spelled as a bare string elsewhere in the code.
"""

from __future__ import annotations

from enum import StrEnum

from autopilot.core.event_words import EventType
from autopilot.core.run_words import (
    HOOK_MODE,
    NODE_COMPLETE_REASON,
    NODE_FAILED_REASONS,
    PARALLEL_MODE,
    TERMINAL_STATUSES,
    MatchMode,
    RunStatus,
)

__all__ = [
    "DEFAULT_EXTENSION",
    "DEFAULT_MAX_TOTAL",
    "HOOK_MODE",
    "LIMIT_REASONS",
    "NODE_COMPLETE_REASON",
    "NODE_FAILED_REASONS",
    "PARALLEL_MODE",
    "TERMINAL_STATUSES",
    "Action",
    "AgentEventKind",
    "EndedBy",
    "ErrorKind",
    "EventType",
    "HookAgent",
    "MatchMode",
    "Outcome",
    "Progress",
    "Reason",
    "RunStatus",
    "SeedStatus",
    "status_of_seed_fold",
]


DEFAULT_EXTENSION = 5
"""Iterations a ``--self-improve`` run is granted at a time (``core.adaptive``; config
``adaptive-extension``)."""

DEFAULT_MAX_TOTAL = 50
"""The most iterations adaptive extensions take a ``--self-improve`` run to."""


class SeedStatus(StrEnum):
    """The status a folded log holds (``fold.Snapshot.status``): the seed reader's own
    five words, kept as its JSON values so a snapshot folds as the seed's does
    (``docs/formats.md``). Nothing shows them as a run's status: ``status_of_seed_fold``
    turns them into ``RunStatus``."""

    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETE = "complete"
    ABORTED = "aborted"


def status_of_seed_fold(seed_status: str) -> RunStatus:
    """The run status a folded log's seed status (``fold.Snapshot.status``) means."""
    return _RUN_STATUS_OF_SEED.get(seed_status, RunStatus.IDLE)


_RUN_STATUS_OF_SEED: dict[str, RunStatus] = {
    SeedStatus.COMPLETE: RunStatus.COMPLETED,
    SeedStatus.ABORTED: RunStatus.STOPPED,
    SeedStatus.PAUSED: RunStatus.PAUSED,
    SeedStatus.RUNNING: RunStatus.RUNNING,
}


class Outcome(StrEnum):
    """How one iteration ended (the ``outcome`` of ``iteration_end``, ``docs/formats.md``)."""

    OK = "ok"
    AGENT_ERROR = "agent_error"
    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    IDLE_TIMEOUT = "idle_timeout"
    LAUNCH_FAILED = "launch_failed"
    KILLED = "killed"


class Progress(StrEnum):
    """Whether an iteration changed anything observable."""

    MADE = "made"
    NONE = "none"
    UNKNOWN = "unknown"


class Action(StrEnum):
    """What the driver does next."""

    CONTINUE = "continue"
    BACKOFF = "backoff"
    WAIT = "wait"
    PAUSE = "pause"
    COMPLETE = "complete"
    ABORT = "abort"
    RETRY = "retry"


class Reason(StrEnum):
    """The closed vocabulary of terminal reasons (``docs/formats.md``)."""

    COMPLETION_PROMISE = "completion_promise"
    BACKLOG_DONE = "backlog_done"
    ABORT_PROMISE = "abort_promise"
    STAGNATION = "stagnation"
    MAX_ITERATIONS = "max_iterations"
    MAX_COST = "max_cost"
    MAX_TOKENS = "max_tokens"
    MAX_DURATION = "max_duration"
    USER_STOPPED = "user_stopped"
    AGENT_FAILING = "agent_failing"
    SEND_ERROR = "send_error"
    SUPERVISOR_GIVEUP = "supervisor_giveup"
    PERMISSION_DENIED = "permission_denied"
    INTERNAL_ERROR = "internal_error"
    WORKSPACE_GONE = "workspace_gone"
    DISK_FULL = "disk_full"
    IO_ERROR = "io_error"
    UNCLAIMED = "unclaimed"
    """A hook run armed for no session that no session claimed within its claim
    window (``hook.arm``)."""
    TAMPERED = "tampered"
    """A driver found the run's event log missing, or not beginning with the run's
    ``armed`` event: its budgets cannot be checked (``loop.armed_limits``)."""


LIMIT_REASONS = frozenset(
    {Reason.MAX_ITERATIONS, Reason.MAX_COST, Reason.MAX_TOKENS, Reason.MAX_DURATION}
)
"""Terminal reasons that mean a budget was reached."""


class AgentEventKind(StrEnum):
    """Kinds of normalised agent events (what an adapter's parser reports)."""

    TEXT = "text"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    USAGE = "usage"
    SESSION = "session"
    RESULT = "result"
    ERROR = "error"
    RETRY = "retry"
    RATE_LIMIT = "rate_limit"


class ErrorKind(StrEnum):
    """Why an agent's attempt failed, as far as its own output tells (the adapter's
    classification)."""

    AUTH = "auth"
    RATE_LIMIT = "rate_limit"
    USAGE_LIMIT = "usage_limit"
    SERVER = "server"
    NETWORK = "network"
    INVALID_REQUEST = "invalid_request"
    SESSION_NOT_FOUND = "session_not_found"
    UNKNOWN = "unknown"


class EndedBy(StrEnum):
    """Why the agent process stopped being read."""

    EXIT = "exit"
    RESULT_GRACE = "result_grace"
    TIMEOUT = "timeout"
    IDLE_TIMEOUT = "idle_timeout"
    KILLED = "killed"
    LAUNCH_FAILED = "launch_failed"
    DRIVER_DIED = "driver_died"
    STOPPED = "stopped"
    """``autopilot stop`` ended a hook run's iteration while its session was still in
    its turn (there is no agent process of autopilot's to end)."""


class HookAgent(StrEnum):
    """The CLIs whose Stop hook autopilot answers."""

    CLAUDE = "claude"
    CODEX = "codex"
