"""The registry of armed hook runs on disk: ``<runs-root>/hooks/<runId>.json``.

One JSON object per file (written with temp + fsync + rename, mode 0600)::

    {"runId": "…", "agent": "claude", "project": "/abs/project", "sessionId": "",
     "claimUntilMs": 0, "blockStreak": 0, "lastAssistantKey": null,
     "iterationStartedAtMs": 0, "inputTokens": 0, "outputTokens": 0,
     "treeHead": null, "treeFingerprint": null, "backlog": false, "costUsd": null,
     "transcriptPath": null, "lastStopAtMs": 0, "cli": null}

``sessionId`` "" means not yet claimed; ``cli`` is ``{"pid", "startTime",
"command"}`` of the session's CLI process once a Stop has been answered. Changes hold
``<runs-root>/hooks/.lock`` (``fcntl``), so two sessions stopping at once cannot both
claim one run. An entry that cannot be read is skipped (and reported), never deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from autopilot.core.vocabulary import HookAgent
from autopilot.store.hook_armed import ENTRY_SUFFIX, hooks_dir
from autopilot.store.private import make_private_dir, open_private

LOCK_NAME = ".lock"
MAX_ENTRY_BYTES = 64 << 10
_LOCK_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class CliProcess:
    """The agent CLI process of a session: its pid and identity (``loop.identity``).

    Attributes:
        pid: The process id.
        start_time: When it started (epoch s).
        command: Its command line (cut to 500 characters), or None.
    """

    pid: int
    start_time: float
    command: str | None = None


@dataclass(frozen=True)
class Arming:
    """One armed run, as the registry holds it.

    Attributes:
        run_id: The run.
        agent: The CLI whose sessions it continues.
        project: The absolute project directory it was armed in.
        session_id: The owning session; "" until a Stop claims it.
        claim_until_ms: An unclaimed arming can be claimed until then (epoch ms).
        block_streak: Consecutive blocks of the current turn so far.
        last_assistant_key: The newest assistant entry at the previous iteration.
        iteration_started_at_ms: When the open iteration started (epoch ms).
        input_tokens: The session's input tokens when it started (the transcript's).
        output_tokens: The session's output tokens then.
        tree_head: The work tree's HEAD then.
        tree_fingerprint: The digest of the work tree's changes then (None: no repo).
        backlog: Each iteration works on the project's next ready work item.
        cost_usd: The session's cost when the open iteration started, as its
            transcript records it (None: the transcript records no cost).
        transcript_path: The session's transcript, as the last Stop named it.
        last_stop_at_ms: When a Stop of the session was last answered (epoch ms; 0:
            none yet).
        cli: The session's CLI process as the last Stop found it (the hook's
            nearest ancestor that is not a shell), or None.
    """

    run_id: str
    agent: HookAgent
    project: str
    session_id: str = ""
    claim_until_ms: int = 0
    block_streak: int = 0
    last_assistant_key: str | None = None
    iteration_started_at_ms: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tree_head: str | None = None
    tree_fingerprint: str | None = None
    backlog: bool = False
    cost_usd: float | None = None
    transcript_path: str | None = None
    last_stop_at_ms: int = 0
    cli: CliProcess | None = None


def entry_path(runs_root: Path, run_id: str) -> Path:
    """``<runs-root>/hooks/<runId>.json``."""
    return Path(hooks_dir(str(runs_root))) / f"{run_id}{ENTRY_SUFFIX}"


def to_json(arming: Arming) -> dict[str, object]:
    """The entry's JSON object."""
    return {
        "runId": arming.run_id,
        "agent": arming.agent.value,
        "project": arming.project,
        "sessionId": arming.session_id,
        "claimUntilMs": arming.claim_until_ms,
        "blockStreak": arming.block_streak,
        "lastAssistantKey": arming.last_assistant_key,
        "iterationStartedAtMs": arming.iteration_started_at_ms,
        "inputTokens": arming.input_tokens,
        "outputTokens": arming.output_tokens,
        "treeHead": arming.tree_head,
        "treeFingerprint": arming.tree_fingerprint,
        "backlog": arming.backlog,
        "costUsd": arming.cost_usd,
        "transcriptPath": arming.transcript_path,
        "lastStopAtMs": arming.last_stop_at_ms,
        "cli": _cli_json(arming.cli),
    }


def _cli_json(cli: CliProcess | None) -> dict[str, object] | None:
    if cli is None:
        return None
    return {"pid": cli.pid, "startTime": cli.start_time, "command": cli.command}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cli_from(raw: object) -> CliProcess | None:
    """The CLI process of an entry; None when absent or malformed (it is only shown)."""
    if not isinstance(raw, dict):
        return None
    pid, start, command = raw.get("pid"), raw.get("startTime"), raw.get("command")
    if not (isinstance(pid, int) and _is_int(pid) and pid > 0):
        return None
    if not (isinstance(start, int | float) and _is_number(start)):
        return None
    return CliProcess(pid, float(start), command if isinstance(command, str) else None)


def from_json(raw: object) -> Arming | None:
    """An arming from its JSON object, or None when a field is missing or mistyped."""
    if not isinstance(raw, dict):
        return None
    run_id, agent, project = raw.get("runId"), raw.get("agent"), raw.get("project")
    session, until = raw.get("sessionId", ""), raw.get("claimUntilMs", 0)
    streak, key = raw.get("blockStreak", 0), raw.get("lastAssistantKey")
    if not (isinstance(run_id, str) and run_id and isinstance(project, str) and project):
        return None
    if agent not in tuple(HookAgent) or not isinstance(session, str):
        return None
    if not (isinstance(until, int) and isinstance(streak, int)):
        return None
    if key is not None and not isinstance(key, str):
        return None
    numbers = [raw.get(name, 0) for name in ("iterationStartedAtMs", "inputTokens", "outputTokens")]
    if not all(_is_int(n) for n in numbers):
        return None
    head, fingerprint = raw.get("treeHead"), raw.get("treeFingerprint")
    if not all(v is None or isinstance(v, str) for v in (head, fingerprint)):
        return None
    backlog = raw.get("backlog", False)
    if not isinstance(backlog, bool):
        return None
    cost, transcript = raw.get("costUsd"), raw.get("transcriptPath")
    last_stop = raw.get("lastStopAtMs", 0)
    if cost is not None and not (isinstance(cost, int | float) and _is_number(cost)):
        return None
    if cost is not None and not cost >= 0:  # NaN and negatives
        return None
    if transcript is not None and not isinstance(transcript, str):
        return None
    if not _is_int(last_stop):
        return None
    return Arming(
        run_id,
        HookAgent(agent),
        project,
        session_id=session,
        claim_until_ms=until,
        block_streak=streak,
        last_assistant_key=key,
        iteration_started_at_ms=numbers[0],
        input_tokens=numbers[1],
        output_tokens=numbers[2],
        tree_head=head,
        tree_fingerprint=fingerprint,
        backlog=backlog,
        cost_usd=float(cost) if cost is not None else None,
        transcript_path=transcript,
        last_stop_at_ms=last_stop,
        cli=_cli_from(raw.get("cli")),
    )


def load_armings(runs_root: Path) -> tuple[list[Arming], list[str]]:
    """Every readable arming, oldest run first, and a line per entry skipped.

    Returns:
        ``(armings, problems)``.
    """
    folder = Path(hooks_dir(str(runs_root)))
    armings: list[Arming] = []
    problems: list[str] = []
    try:
        names = sorted(
            entry.name
            for entry in os.scandir(folder)
            if entry.name.endswith(ENTRY_SUFFIX) and not entry.name.startswith(".")
        )
    except OSError:
        return [], []
    for name in names:
        path = folder / name
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_ENTRY_BYTES + 1)
            arming = from_json(json.loads(data)) if len(data) <= MAX_ENTRY_BYTES else None
        except (OSError, ValueError, RecursionError):
            arming = None
        if arming is None or f"{arming.run_id}{ENTRY_SUFFIX}" != name:
            problems.append(f"{path} cannot be read as an armed run; left as it is")
            continue
        armings.append(arming)
    armings.sort(key=lambda a: _started_at(a.run_id))
    return armings, problems


def _started_at(run_id: str) -> int:
    tail = run_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


@contextlib.contextmanager
def locked(runs_root: Path, wait_seconds: float | None = None) -> Iterator[bool]:
    """Hold the registry's lock (released by the OS if the holder dies).

    Args:
        runs_root: The runs root.
        wait_seconds: Give up after this long (None: wait as long as it takes).

    Yields:
        True when the lock is held; False when ``wait_seconds`` passed first.
    """
    folder = Path(hooks_dir(str(runs_root)))
    make_private_dir(folder, exist_ok=True)
    fd = open_private(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        yield _take(fd, wait_seconds)
    finally:
        os.close(fd)


def _take(fd: int, wait_seconds: float | None) -> bool:
    if wait_seconds is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_LOCK_POLL_SECONDS)


def write_arming(runs_root: Path, arming: Arming) -> None:
    """Write (or replace) the arming's entry atomically; call under ``locked``.

    Raises:
        OSError: the entry cannot be written.
    """
    path = entry_path(runs_root, arming.run_id)
    temp = path.with_name(f".{path.name}.tmp")
    fd = open_private(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, (json.dumps(to_json(arming)) + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)


def remove_arming(runs_root: Path, run_id: str) -> bool:
    """Remove the run's entry (its run has ended); False if there was none."""
    try:
        entry_path(runs_root, run_id).unlink()
    except FileNotFoundError:
        return False
    return True
