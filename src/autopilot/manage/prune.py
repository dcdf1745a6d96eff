"""``autopilot prune``: remove old runs' folders and their ``index.jsonl`` rows.

A run is old when its last sign of life — the newest of its index row's ``ts``,
the start time in its id, and the modification times of its ``state.json`` and
``events.jsonl`` — is older than the cut-off. An **active** run is never pruned:
one not terminated whose driver is alive or cannot be told to be dead
(``activity.run_activity`` is ``ACTIVE`` or ``UNKNOWN``), nor one whose
``state.json`` cannot be read, nor one whose ``driver.lock`` is held.

Removal renames a run's folder to ``.prune-<runId>`` (so it disappears at once)
and then deletes it; a leftover ``.prune-*`` folder from an interrupted prune is
deleted next time. ``index.jsonl`` is then rewritten under ``index.jsonl.lock``:
a temp file, fsync, rename (``store.atomic``). Rows appended while it
is rewritten are carried over.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from autopilot.manage.activity import Activity, run_activity
from autopilot.runtime.liveness import driver_lock_held
from autopilot.store.atomic import write_atomically
from autopilot.store.index import INDEX_FILE, index_lock, read_index
from autopilot.store.paths import is_valid_run_id, list_run_ids, started_at_of
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state_quietly
from autopilot.workspace.cleanup import Cleanup, clean_up_run, unsaved_work
from autopilot.workspace.run_workspace import RunPlace
from autopilot.workspace.scratch import scratch_root, sweep

TRASH_PREFIX = ".prune-"


@dataclass
class PrunePlan:
    """What a prune would do.

    Attributes:
        remove: Old, inactive runs whose folders (if any) and rows go.
        kept: Old runs kept because they are active, with the reason.
        sizes: Bytes on disk per run in ``remove``.
    """

    remove: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)


@dataclass
class PruneResult:
    """What a prune did: runs removed, failures (run → error), index rows dropped,
    per run what went from git (worktree, checkpoint refs, branch) or stayed, and the
    killed merges' temporary worktrees it removed (``swept``, lines)."""

    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    rows_dropped: int = 0
    git: dict[str, Cleanup] = field(default_factory=dict)
    swept: list[str] = field(default_factory=list)


def _mtime_ms(path: Path) -> int | None:
    try:
        return int(path.stat().st_mtime * 1000)
    except OSError:
        return None


def last_activity_ms(root: Path, run_id: str, row_ts: int | None) -> int:
    """The newest of the row's ``ts``, the id's start time and the files' mtimes."""
    moments = [started_at_of(run_id)]
    if row_ts is not None:
        moments.append(row_ts)
    folder = RunDir(root / run_id)
    for path in (folder.state, folder.events):
        moment = _mtime_ms(path)
        if moment is not None:
            moments.append(moment)
    return max(moments)


def folder_bytes(path: Path) -> int:
    """Total size of the files under ``path`` (0 if it is gone)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def _keep_reason(folder: Path) -> str | None:
    if not folder.exists():
        return None
    held = driver_lock_held(folder)
    if held is not False:
        return "a driver holds it" if held else "its lock cannot be checked"
    state = read_state_quietly(RunDir(folder).state)
    if state is None:
        # A folder that never got a state.json never started; a corrupt one is kept.
        return "state.json unreadable" if RunDir(folder).state.exists() else None
    activity = run_activity(folder, state)
    if activity is Activity.ACTIVE:
        return "driver alive"
    if activity is Activity.UNKNOWN:
        return "driver state unknown"
    return unsaved_work(RunPlace.from_state_json(state.to_json()))


def plan_prune(root: Path, older_than_ms: int, now_ms: int) -> PrunePlan:
    """Decide which runs a prune removes. Reads only; changes nothing.

    Args:
        root: The runs root.
        older_than_ms: Runs idle for longer than this are old.
        now_ms: Now (epoch ms).
    """
    row_ts: dict[str, int | None] = {}
    for row in read_index(root):
        ts = row.get("ts")
        row_ts[str(row["runId"])] = ts if isinstance(ts, int) else None
    # A row whose id is malformed names no folder; it is left for a person to look at.
    candidates = {
        run_id for run_id in set(row_ts) | set(list_run_ids(root)) if is_valid_run_id(run_id)
    }
    plan = PrunePlan()
    cutoff = now_ms - older_than_ms
    for run_id in sorted(candidates, key=lambda rid: (started_at_of(rid), rid)):
        if last_activity_ms(root, run_id, row_ts.get(run_id)) >= cutoff:
            continue
        reason = _keep_reason(root / run_id)
        if reason is not None:
            plan.kept[run_id] = reason
            continue
        plan.remove.append(run_id)
        plan.sizes[run_id] = folder_bytes(root / run_id)
    return plan


def _row_run_id(line: bytes) -> str | None:
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return None
    run_id = row.get("runId") if isinstance(row, dict) else None
    return run_id if isinstance(run_id, str) else None


def _kept_lines(data: bytes, drop: set[str]) -> tuple[list[bytes], int]:
    kept: list[bytes] = []
    dropped = 0
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        if _row_run_id(line) in drop:
            dropped += 1
        else:
            kept.append(line)
    return kept, dropped


def rewrite_index(root: Path, drop: set[str]) -> int:
    """Rewrite ``index.jsonl`` without the rows of ``drop``; returns rows dropped.

    Call with ``index_lock`` held. Rows appended to the old file while it is
    rewritten are carried over to the new one.

    Raises:
        OSError: the index cannot be read or written.
    """
    path = root / INDEX_FILE
    try:
        old = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        data = b""
        while True:
            chunk = os.read(old, 1 << 20)
            if not chunk:
                break
            data += chunk
        end = data.rfind(b"\n") + 1
        kept, dropped = _kept_lines(data[:end], drop)
        content = b"".join(line + b"\n" for line in kept)
        write_atomically(path, content)
        with contextlib.suppress(OSError):
            os.chmod(path, 0o600)
        grown = os.fstat(old).st_size - end
        late = os.pread(old, grown, end) if grown > 0 else b""
    finally:
        os.close(old)
    if late:
        late_kept, late_dropped = _kept_lines(late, drop)
        dropped += late_dropped
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b"".join(line + b"\n" for line in late_kept))
        finally:
            os.close(fd)
    return dropped


def _remove_folder(root: Path, run_id: str) -> None:
    folder = root / run_id
    if not folder.exists():
        return
    trash = root / f"{TRASH_PREFIX}{run_id}"
    os.replace(folder, trash)
    shutil.rmtree(trash)


def _sweep_trash(root: Path) -> None:
    for entry in os.scandir(root):
        if entry.name.startswith(TRASH_PREFIX) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)


def apply_prune(root: Path, plan: PrunePlan, *, branches: bool = False) -> PruneResult:
    """Remove the planned runs and rewrite the index, under the index lock.

    Each run is checked again just before it goes; one that became active is
    left alone and reported as failed. A run's worktree and checkpoint refs go
    first (``workspace.cleanup``); its branch too with ``branches``, once merged.
    Temporary worktrees of merges that were killed go too (``workspace.scratch``).

    Raises:
        EnvironmentProblem: the index lock could not be had.
        OSError: the index could not be rewritten.
    """
    result = PruneResult()
    with index_lock(root):
        _sweep_trash(root)
        result.swept = sweep(scratch_root(root))
        for run_id in plan.remove:
            reason = _keep_reason(root / run_id)
            if reason is not None:
                result.failed[run_id] = f"kept: {reason}"
                continue
            state = read_state_quietly(RunDir(root / run_id).state)
            if state is not None:
                cleanup = clean_up_run(
                    root / run_id, RunPlace.from_state_json(state.to_json()), branches=branches
                )
                result.git[run_id] = cleanup
                if cleanup.blocked:
                    result.failed[run_id] = "kept: " + "; ".join(cleanup.kept)
                    continue
            try:
                _remove_folder(root, run_id)
            except OSError as error:
                result.failed[run_id] = error.strerror or str(error)
                continue
            result.removed.append(run_id)
        result.rows_dropped = rewrite_index(root, set(result.removed))
    return result
