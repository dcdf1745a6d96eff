"""``RunState``: ``state.json`` as a typed value, with one decode and one encode.

The format is in ``docs/formats.md`` ("state.json"). ``decode_state`` checks the
type of every field autopilot reads — a file that is JSON but not of this shape is
as corrupt as a torn one — and builds a ``RunState``; ``RunState.to_json`` writes it
back. A missing field or ``null`` takes its default. Fields autopilot does not know
(a newer or an older writer's) are kept in ``extra`` and written back unchanged.

A ``state.json`` written by the Node implementation of the tool family decodes too: it
has no ``status``, ``config``, ``spend`` or ``agent`` (``docs/formats.md``, "Runs
written by the Node implementation"); they are derived from its ``iter``,
``terminated``, ``terminationReason``, ``max``, ``min`` and ``contextMode``.
"""

from __future__ import annotations

from pathlib import Path

from msgspec import Struct, field

from autopilot.config import DEFAULT_MAX_ITERATIONS, RunConfig
from autopilot.core.delivery import DeliveryLedger
from autopilot.core.state import LoopCounters, Spend, Tokens, UsageBaseline
from autopilot.core.vocabulary import (
    NODE_COMPLETE_REASON,
    NODE_FAILED_REASONS,
    RunStatus,
)
from autopilot.errors import StateFileError
from autopilot.store.state_shape import SHAPE, check_fields

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

REBUILT_MARK = "rebuiltFromLog"
"""``state.json``'s field (in ``RunState.extra``) on a state ``doctor --repair`` rebuilt
from a log that does not record what the run was armed with: it cannot start again."""

NODE_AGENT = "copilot"
"""The agent of a run written by the Node implementation (it drives Copilot CLI)."""


class PromptSource(Struct, frozen=True):
    """Where the prompt comes from: a file re-read every iteration, or fixed text."""

    text: str | None = None
    path: Path | None = None

    def to_json(self) -> dict[str, str | None]:
        """``state.json``'s ``prompt`` object."""
        return {"text": self.text, "path": str(self.path) if self.path else None}


class RunState(Struct):
    """A run's ``state.json`` (``docs/formats.md``). Times are epoch ms unless named
    ``*_time`` (process start times, epoch seconds).

    Attributes:
        run_id: ``<label>-<startedAtEpochMs>``.
        label: The run's label.
        mode: ``prompt`` (the Node implementation also wrote ``self-improve`` …).
        context_mode: ``fresh`` or ``continue``.
        agent: The agent's name (``--agent``).
        model: The model asked for, if any.
        cwd: The work tree the agent runs in (None for a Node-written run).
        started_at_ms: When the run was armed.
        max_iterations: The iteration budget as armed (0: unlimited).
        min_iterations: Promises are not honoured before this many iterations.
        iteration: The number of the iteration last started.
        iteration_open: That iteration has not been spent yet (it is running, or a
            usage limit stopped it and it is retried).
        status: See ``RunStatus``.
        paused: A pause is asked for. paused_at_ms: when the driver paused.
        total_paused_ms: Time spent paused.
        stop_requested: A stop is asked for; ``stop_now`` ends the agent at once.
        stop_reason: Who asked for the stop.
        session_id: The agent session resumed by ``--continue``.
        pid: The driver's pid; ``pid_start_time`` and ``pid_command`` its identity.
        host: The driver's host name.
        agent_pid: The running agent's pid (its process group);
            ``agent_start_time`` its start time.
        attempt_dir: The running attempt's folder.
        supervisor_pid: The supervisor's pid (a detached run);
            ``supervisor_start_time`` its start time.
        supervisor_restarts: Epoch ms of the supervisor's restarts within its window.
        agent_env: The names (never the values) of the agent's variables — those its
            adapter's ``env_needed`` matches — in the environment the run's first
            driver started with; None before one started.
        env_missing: Those the current driver's environment lacks.
        delivery: Where the messages taken from the inbox stand (``core.delivery``).
        spend: See ``Spend``. loop: See ``LoopCounters``.
        waiting_until_ms: The end of a usage-limit wait in progress.
        terminated: The run has ended, with ``termination_reason`` and
            ``termination_note``.
        ending: The reason of a completion the driver is about to log, written
            before its ``complete`` event: without it a logged ``complete`` that
            ``state.json`` does not record is not the driver's (``store.logged_end``).
        config: What the run was armed with.
        prompt: Where its prompt comes from.
        extra_args: Arguments for the agent given after ``--``.
        command: The program of the ``command`` agent.
        usage_baseline: See ``UsageBaseline``.
        gate: The question the run waits on a person for (status ``awaiting_user``).
        gate_answer: The person's answer (``autopilot answer``/``approve``), until
            the driver takes it.
        hold: Why the driver holds the run paused until a file is fixed (a broken
            ``tasks.jsonl`` line, an incomplete ``approved-run.json``), while it does.
        version: Bumped by every write.
        extra: Fields this version of autopilot does not know, kept as they are.
    """

    run_id: str = ""
    label: str | None = None
    mode: str = "prompt"
    context_mode: str = "fresh"
    agent: str = "claude"
    model: str | None = None
    cwd: str | None = None
    started_at_ms: int = 0
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    min_iterations: int = 1
    iteration: int = 0
    iteration_open: bool = False
    status: RunStatus = RunStatus.RUNNING
    paused: bool = False
    paused_at_ms: int | None = None
    total_paused_ms: int = 0
    stop_requested: bool = False
    stop_now: bool = False
    stop_reason: str | None = None
    session_id: str | None = None
    pid: int | None = None
    pid_start_time: float | None = None
    pid_command: str | None = None
    host: str | None = None
    agent_pid: int | None = None
    agent_start_time: float | None = None
    attempt_dir: str | None = None
    supervisor_pid: int | None = None
    supervisor_start_time: float | None = None
    supervisor_restarts: tuple[int, ...] = ()
    agent_env: tuple[str, ...] | None = None
    env_missing: tuple[str, ...] = ()
    delivery: DeliveryLedger = field(default_factory=DeliveryLedger)
    spend: Spend = field(default_factory=Spend)
    loop: LoopCounters = field(default_factory=LoopCounters)
    waiting_until_ms: int | None = None
    terminated: bool = False
    termination_reason: str | None = None
    termination_note: str | None = None
    ending: str | None = None
    config: RunConfig = field(default_factory=RunConfig)
    prompt: PromptSource = field(default_factory=PromptSource)
    extra_args: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    usage_baseline: UsageBaseline | None = None
    gate: str | None = None
    gate_answer: str | None = None
    hold: str | None = None
    version: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        """The run ended by completing."""
        return self.terminated and self.status is RunStatus.COMPLETED

    def to_json(self) -> dict[str, Any]:
        """The ``state.json`` object: known fields in the seed's order, then ``extra``."""
        baseline = self.usage_baseline
        data: dict[str, Any] = {
            "runId": self.run_id,
            "label": self.label,
            "mode": self.mode,
            "contextMode": self.context_mode,
            "agent": self.agent,
            "model": self.model,
            "cwd": self.cwd,
            "startedAt": self.started_at_ms,
            "max": self.max_iterations,
            "min": self.min_iterations,
            "iter": self.iteration,
            "iterationOpen": self.iteration_open,
            "status": self.status.value,
            "paused": self.paused,
            "pausedAt": self.paused_at_ms,
            "totalPausedMs": self.total_paused_ms,
            "stopRequested": self.stop_requested,
            "stopNow": self.stop_now,
            "stopReason": self.stop_reason,
            "sessionId": self.session_id,
            "pid": self.pid,
            "pidStartTime": self.pid_start_time,
            "pidCommand": self.pid_command,
            "host": self.host,
            "agentPid": self.agent_pid,
            "agentStartTime": self.agent_start_time,
            "attemptDir": self.attempt_dir,
            "supervisorPid": self.supervisor_pid,
            "supervisorStartTime": self.supervisor_start_time,
            "supervisorRestarts": list(self.supervisor_restarts),
            "agentEnv": None if self.agent_env is None else list(self.agent_env),
            "envMissing": list(self.env_missing),
            "delivery": self.delivery.to_json(),
            "spend": self.spend.to_json(),
            "loop": self.loop.to_json(),
            "waitingUntil": self.waiting_until_ms,
            "terminated": self.terminated,
            "terminationReason": self.termination_reason,
            "terminationNote": self.termination_note,
            "ending": self.ending,
            "config": self.config.to_json(),
            "prompt": self.prompt.to_json(),
            "extraArgs": list(self.extra_args),
            "command": list(self.command),
            "usageBaseline": None
            if baseline is None
            else {
                "sessionId": baseline.session_id,
                "input": baseline.input_tokens,
                "output": baseline.output_tokens,
            },
            "gate": self.gate,
            "gateAnswer": self.gate_answer,
            "hold": self.hold,
            "version": self.version,
        }
        for key, value in self.extra.items():
            data.setdefault(key, value)
        return data


_KNOWN_FIELDS = frozenset(SHAPE) | {"config", "delivery"}


def decode_state(data: Any, path: Path | str = "state.json") -> RunState:
    """Check a parsed ``state.json`` and build its ``RunState``.

    Every field autopilot reads that is present and not ``null`` must have its JSON
    type (numbers finite, from 0 to 10^15), and ``config`` must be what
    ``RunConfig.from_json`` accepts. Unknown fields go to ``extra``.

    Args:
        data: The parsed JSON.
        path: The file it came from, for the message.

    Raises:
        StateFileError: the first field of the wrong type, as one line, e.g.
            ``<path>: field 'spend' must be an object (corrupt state file)``.
    """
    if not isinstance(data, dict):
        raise StateFileError(f"{path} does not hold a JSON object (corrupt state file)")
    check_fields(data, SHAPE, "", path)
    node_written = is_node_written(data)
    config = _config_of(data, path, node_written=node_written)
    spend = _dict(data.get("spend"))
    tokens = _dict(spend.get("tokens"))
    loop = _dict(data.get("loop"))
    prompt = _dict(data.get("prompt"))
    baseline = _dict(data.get("usageBaseline"))
    run_id = _str(data.get("runId")) or ""
    iteration = _int(data.get("iter"))
    terminated = bool(data.get("terminated"))
    reason = _str(data.get("terminationReason"))
    return RunState(
        run_id=run_id,
        label=_str(data.get("label")) or (run_id.rsplit("-", 1)[0] if run_id else None),
        mode=_str(data.get("mode")) or "prompt",
        context_mode=_str(data.get("contextMode")) or config.context,
        agent=_str(data.get("agent")) or config.agent,
        model=_str(data.get("model")),
        cwd=_str(data.get("cwd")),
        started_at_ms=_int(data.get("startedAt")),
        max_iterations=_int(data.get("max"), config.max_iterations),
        min_iterations=_int(data.get("min"), config.min_iterations),
        iteration=iteration,
        iteration_open=bool(data.get("iterationOpen")),
        status=_status_of(data, terminated, reason),
        paused=bool(data.get("paused")),
        paused_at_ms=_int_or_none(data.get("pausedAt")),
        total_paused_ms=_int(data.get("totalPausedMs")),
        stop_requested=bool(data.get("stopRequested")),
        stop_now=bool(data.get("stopNow")),
        stop_reason=_str(data.get("stopReason")),
        session_id=_str(data.get("sessionId")),
        pid=_int_or_none(data.get("pid")),
        pid_start_time=_float_or_none(data.get("pidStartTime")),
        pid_command=_str(data.get("pidCommand")),
        host=_str(data.get("host")),
        agent_pid=_int_or_none(data.get("agentPid")),
        agent_start_time=_float_or_none(data.get("agentStartTime")),
        attempt_dir=_str(data.get("attemptDir")),
        supervisor_pid=_int_or_none(data.get("supervisorPid")),
        supervisor_start_time=_float_or_none(data.get("supervisorStartTime")),
        supervisor_restarts=tuple(_int(t) for t in data.get("supervisorRestarts") or ()),
        agent_env=None if (names := data.get("agentEnv")) is None else tuple(names),
        env_missing=tuple(data.get("envMissing") or ()),
        delivery=DeliveryLedger.from_json(data.get("delivery")),
        spend=Spend(
            cost_usd=float(spend.get("costUsd") or 0.0),
            tokens=Tokens(_int(tokens.get("input")), _int(tokens.get("output"))),
            active_ms=_int(spend.get("activeMs")),
            waiting_ms=_int(spend.get("waitingMs")),
            # The Node implementation counts finished iterations in ``iter`` alone.
            iterations=_int(spend.get("iterations"), iteration if node_written else 0),
        ),
        loop=LoopCounters(
            stagnation_streak=_int(loop.get("stagnationStreak")),
            last_response_digest=_str(loop.get("lastResponseDigest")),
            failure_streak=_int(loop.get("failureStreak")),
            last_failure_signature=_str(loop.get("lastFailureSignature")),
            rate_limit_waits=_int(loop.get("rateLimitWaits")),
            last_denial=_str(loop.get("lastDenial")),
        ),
        waiting_until_ms=_int_or_none(data.get("waitingUntil")),
        terminated=terminated,
        termination_reason=reason,
        termination_note=_str(data.get("terminationNote")),
        ending=_str(data.get("ending")),
        config=config,
        prompt=PromptSource(
            text=_str(prompt.get("text")),
            path=Path(path_text) if (path_text := _str(prompt.get("path"))) else None,
        ),
        extra_args=tuple(data.get("extraArgs") or ()),
        command=tuple(data.get("command") or ()),
        usage_baseline=UsageBaseline(
            baseline["sessionId"], _int(baseline.get("input")), _int(baseline.get("output"))
        )
        if isinstance(baseline.get("sessionId"), str)
        else None,
        gate=_str(data.get("gate")),
        gate_answer=_str(data.get("gateAnswer")),
        hold=_str(data.get("hold")),
        version=_int(data.get("version")),
        extra={key: value for key, value in data.items() if key not in _KNOWN_FIELDS},
    )


def is_node_written(data: dict[str, Any]) -> bool:
    """Was this ``state.json`` written by the Node implementation of the tool family?

    Its writer always writes ``resetOn`` and ``iter``, and never ``status``,
    ``config`` or ``spend`` (``docs/formats.md``, "Runs written by the Node
    implementation").
    """
    return {"iter", "resetOn"} <= data.keys() and not {"status", "config", "spend"} & data.keys()


def _config_of(data: dict[str, Any], path: Path | str, *, node_written: bool) -> RunConfig:
    if data.get("config") is not None:
        return RunConfig.from_json(data["config"], source=str(path))
    if not node_written:
        return RunConfig()
    # The Node implementation keeps its limits in ``max``/``min``/``contextMode``.
    context = data.get("contextMode")
    return RunConfig(
        agent=_str(data.get("agent")) or NODE_AGENT,
        max_iterations=_int(data.get("max"), RunConfig.max_iterations),
        min_iterations=max(1, _int(data.get("min"), 1)),
        context=context if context in ("fresh", "continue") else "fresh",
    )


def _status_of(data: dict[str, Any], terminated: bool, reason: str | None) -> RunStatus:
    text = data.get("status")
    if isinstance(text, str):
        try:
            return RunStatus(text)
        except ValueError:
            pass  # a status from a newer version: derived below, kept nowhere else
    if terminated:
        if reason == NODE_COMPLETE_REASON:
            return RunStatus.COMPLETED
        return RunStatus.ERROR if reason in NODE_FAILED_REASONS else RunStatus.STOPPED
    return RunStatus.PAUSED if data.get("paused") else RunStatus.RUNNING


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any, default: int = 0) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _int_or_none(value: Any) -> int | None:
    return _int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None
