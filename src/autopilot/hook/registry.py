"""The registry of armed hook runs on disk: ``<runs-root>/hooks/<runId>.json``.

One JSON object per file (written with temp + fsync + rename, mode 0600)::

    {"runId": "…", "agent": "claude", "project": "/abs/project", "sessionId": "",
     "claimUntilMs": 0, "blockStreak": 0, "lastAssistantKey": null,
     "iterationStartedAtMs": 0, "inputTokens": 0, "outputTokens": 0,
     "treeHead": null, "treeFingerprint": null, "backlog": false}

``sessionId`` "" means not yet claimed. Changes hold ``<runs-root>/hooks/.lock``
(``fcntl``), so two sessions stopping at once cannot both claim one run. An entry
that cannot be read is skipped (and reported), never deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from autopilot.hook.armed import ENTRY_SUFFIX, hooks_dir
from autopilot.hook.decide import Arming
from autopilot.hook.inputs import HookAgent
from autopilot.store.private import make_private_dir, open_private

LOCK_NAME = ".lock"
MAX_ENTRY_BYTES = 64 << 10


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
    }


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
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
        return None
    head, fingerprint = raw.get("treeHead"), raw.get("treeFingerprint")
    if not all(v is None or isinstance(v, str) for v in (head, fingerprint)):
        return None
    backlog = raw.get("backlog", False)
    if not isinstance(backlog, bool):
        return None
    return Arming(
        run_id,
        HookAgent(agent),
        project,
        session,
        until,
        streak,
        key,
        numbers[0],
        numbers[1],
        numbers[2],
        head,
        fingerprint,
        backlog,
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
def locked(runs_root: Path) -> Iterator[None]:
    """Hold the registry's lock (released by the OS if the holder dies)."""
    folder = Path(hooks_dir(str(runs_root)))
    make_private_dir(folder, exist_ok=True)
    fd = open_private(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


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
