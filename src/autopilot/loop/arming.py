"""Arming a run: its folder, ``state.json``, the ``armed`` event and index row.

Also what a run's end means to the caller: ``RunResult`` and the documented exit
codes (0 complete, 1 aborted or failed, 3 a budget reached, 130 stopped; 2 and 4
are the command line's usage and environment errors).
"""

from __future__ import annotations

import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from autopilot.config import RunConfig
from autopilot.errors import StateFileError
from autopilot.loop.clock import Clock
from autopilot.loop.policy import LIMIT_REASONS, Reason
from autopilot.store.events import EventLog, EventType
from autopilot.store.index import append_index_row
from autopilot.store.paths import make_run_id, run_dir
from autopilot.store.private import make_private_dir
from autopilot.store.state import RunStatus, StateStore

EXIT_COMPLETE = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LIMIT = 3
EXIT_ENVIRONMENT = 4
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class PromptSource:
    """Where the prompt comes from: a file re-read every iteration, or fixed text."""

    text: str | None = None
    path: Path | None = None

    def to_json(self) -> dict[str, str | None]:
        """For ``state.json``."""
        return {"text": self.text, "path": str(self.path) if self.path else None}

    @classmethod
    def from_json(cls, data: Any) -> PromptSource:
        """From ``to_json`` output."""
        if not isinstance(data, dict):
            raise StateFileError("state.json has no prompt")
        path = data.get("path")
        return cls(text=data.get("text"), path=Path(path) if path else None)


@dataclass(frozen=True)
class RunResult:
    """How a run ended: its terminal event type, reason, note and exit code."""

    run_id: str
    terminal_type: str
    reason: str
    note: str | None
    exit_code: int


def exit_code_for(terminal_type: str, reason: str) -> int:
    """The documented exit code for a terminal event."""
    if terminal_type == EventType.COMPLETE:
        return EXIT_COMPLETE
    if reason == Reason.USER_STOPPED:
        return EXIT_INTERRUPTED
    if reason in {r.value for r in LIMIT_REASONS}:
        return EXIT_LIMIT
    return EXIT_FAILED


def describe_ending(reason: str | None, *, completed: bool) -> str:
    """How a run ended, in the same words everywhere people read it.

    ``completed (completion_promise)``, ``stopped by the user``, ``budget reached
    (max_cost)``, ``failed (agent_failing)`` or ``aborted (stagnation)``.
    """
    if completed:
        return f"completed ({reason})" if reason else "completed"
    if reason == Reason.USER_STOPPED:
        return "stopped by the user"
    if reason in {r.value for r in LIMIT_REASONS}:
        return f"budget reached ({reason})"
    if reason == Reason.AGENT_FAILING:
        return f"failed ({reason})"
    return f"aborted ({reason})" if reason else "aborted"


def status_for(terminal_type: str, reason: str) -> str:
    """The ``state.json`` status a terminal event leaves the run in."""
    if terminal_type == EventType.COMPLETE:
        return RunStatus.COMPLETED
    if reason == Reason.AGENT_FAILING:
        return RunStatus.ERROR
    return RunStatus.STOPPED


def process_start_time(pid: int) -> float | None:
    """A process's start time (epoch s), or None if it is gone: its identity."""
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def arm_run(
    root: Path,
    config: RunConfig,
    prompt: PromptSource,
    cwd: Path,
    clock: Clock,
    *,
    extra_args: tuple[str, ...] = (),
    command: tuple[str, ...] = (),
    mode: str = "prompt",
) -> str:
    """Create a run: its folder, ``state.json``, the ``armed`` event and index row.

    Returns:
        The new run id.

    Raises:
        UsageError: the label is invalid.
        RunsRootError/StateFileError: the files cannot be written.
    """
    label = config.label or cwd.name or "run"
    label = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in label)[:64].strip("-.")
    label = label or "run"
    started_at = clock.now_ms()
    while True:
        run_id = make_run_id(label, started_at)
        folder = run_dir(root, run_id)
        try:
            make_private_dir(folder)
            break
        except FileExistsError:
            started_at += 1
        except OSError as error:
            raise StateFileError(f"cannot create {folder}: {error.strerror or error}") from None
    state: dict[str, Any] = {
        "runId": run_id,
        "label": label,
        "mode": mode,
        "contextMode": config.context,
        "agent": config.agent,
        "model": config.model,
        "cwd": str(cwd),
        "startedAt": started_at,
        "max": config.max_iterations,
        "min": config.min_iterations,
        "iter": 0,
        "iterationOpen": False,
        "status": RunStatus.RUNNING,
        "paused": False,
        "pausedAt": None,
        "totalPausedMs": 0,
        "stopRequested": False,
        "stopNow": False,
        "stopReason": None,
        "sessionId": None,
        "pid": None,
        "pidStartTime": None,
        "host": socket.gethostname(),
        "spend": {
            "costUsd": 0.0,
            "tokens": {"input": 0, "output": 0},
            "activeMs": 0,
            "waitingMs": 0,
            "iterations": 0,
        },
        "loop": {
            "stagnationStreak": 0,
            "lastResponseDigest": None,
            "failureStreak": 0,
            "lastFailureSignature": None,
            "rateLimitWaits": 0,
        },
        "waitingUntil": None,
        "terminated": False,
        "terminationReason": None,
        "terminationNote": None,
        "config": config.to_json(),
        "prompt": prompt.to_json(),
        "extraArgs": list(extra_args),
        "command": list(command),
    }
    StateStore(folder / "state.json").create(state)
    log = EventLog(folder / "events.jsonl", run_id, clock.now_ms)
    armed = log.emit(
        EventType.ARMED,
        label=label,
        startedAt=started_at,
        maxIterations=config.max_iterations,
        minIterations=config.min_iterations,
        contextMode=config.context,
        mode=mode,
        agent=config.agent,
        model=config.model,
        cwd=str(cwd),
    )
    log.close()
    if armed is not None:
        try:
            append_index_row(root, armed)
        except OSError as error:
            print(f"autopilot: warning: index not updated: {error.strerror}", file=sys.stderr)
    return run_id
