"""Arming a run: its folder, ``state.json``, the ``armed`` event and index row."""

from __future__ import annotations

import sys
from _socket import gethostname  # socket.gethostname itself, without socket's imports
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autopilot.config import RunConfig
from autopilot.core.vocabulary import EventType
from autopilot.errors import AutopilotError, StateFileError
from autopilot.loop.armed_limits import limits_of
from autopilot.loop.clock import Clock
from autopilot.store.events import EventLog
from autopilot.store.index import append_index_row
from autopilot.store.launch_record import LAUNCH_KEY, LaunchRecord, launch_field
from autopilot.store.paths import make_run_id, run_dir
from autopilot.store.private import make_private_dir
from autopilot.store.run_state import PromptSource, RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore
from autopilot.workspace.repo import open_repository
from autopilot.workspace.worktrees import RunWorktree, create_worktree, worktree_path_for


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
    worktree: bool = False,
    start: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Create a run: its folder, ``state.json``, the ``armed`` event and index row.

    With ``worktree``, the run gets its own git worktree on a new branch
    ``autopilot/<runId>`` from ``cwd``'s HEAD (``workspace.worktrees``), under
    ``<root>/worktrees/``; the agent works in the same subdirectory of it as ``cwd``
    is of its checkout, and ``state.json`` records it (``worktree``). ``start`` names
    the branch the worktree starts from instead of HEAD (a lane of a parallel run);
    ``extra`` adds fields to ``state.json`` (a lane's ``lane``).

    Returns:
        The new run id.

    Raises:
        UsageError: the label is invalid.
        RepositoryError: ``worktree`` and ``cwd`` is not in a repository with a
            commit, or the branch or path exists (nothing is left behind).
        RunsRootError/StateFileError: the files cannot be written.
    """
    label = config.label or cwd.name or "run"
    label = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in label)[:64].strip("-.")
    label = label or "run"
    started_at = clock.now_ms()
    while True:
        run_id = make_run_id(label, started_at)
        path = run_dir(root, run_id)
        try:
            make_private_dir(path)
            break
        except FileExistsError:
            started_at += 1
        except OSError as error:
            raise StateFileError(f"cannot create {path}: {error.strerror or error}") from None
    made: RunWorktree | None = None
    left_behind: list[str] = []
    if worktree:
        try:
            origin = open_repository(cwd)
            made, left_behind = create_worktree(
                origin, worktree_path_for(root, run_id), run_id, start=start
            )
        except AutopilotError:
            import shutil  # its archive support loads bz2 and lzma: only when needed

            shutil.rmtree(path, ignore_errors=True)
            raise
        cwd = (
            made.path / cwd.relative_to(origin.top) if cwd.is_relative_to(origin.top) else made.path
        )
    state = RunState(
        run_id=run_id,
        label=label,
        mode=mode,
        context_mode=config.context,
        agent=config.agent,
        model=config.model,
        cwd=str(cwd),
        started_at_ms=started_at,
        max_iterations=config.max_iterations,
        min_iterations=config.min_iterations,
        host=gethostname(),
        config=config,
        prompt=prompt,
        extra_args=extra_args,
        command=command,
        extra={**({"worktree": made.to_json()} if made else {}), **(extra or {})},
    )
    folder = RunDir(path)
    fields: dict[str, Any] = {
        "label": label,
        "startedAt": started_at,
        "maxIterations": config.max_iterations,
        "minIterations": config.min_iterations,
        "contextMode": config.context,
        "mode": mode,
        "agent": config.agent,
        "model": config.model,
        "cwd": str(cwd),
        "limits": limits_of(config),
    }
    record = LaunchRecord(config, prompt, extra_args, command, dict(state.extra))
    try:
        launch = launch_field(folder, record, {"type": EventType.ARMED, "runId": run_id, **fields})
    except OSError as error:
        raise StateFileError(f"cannot write {folder.launch}: {error.strerror or error}") from None
    StateStore(folder.state).create(state)
    log = EventLog(folder.events, run_id, clock.now_ms)
    armed = log.emit(EventType.ARMED, **fields, **{LAUNCH_KEY: launch})
    if made is not None:
        log.emit(
            EventType.WORKTREE_CREATED,
            path=str(made.path),
            branch=made.branch,
            baseRef=made.base,
            origin=str(made.origin),
        )
        for note in left_behind:  # said where the user typed the command, and logged
            log.emit(EventType.WARNING, note=note)
            print(f"autopilot: warning: {note}", file=sys.stderr)
    log.close()
    if armed is not None:
        try:
            append_index_row(root, {k: v for k, v in armed.items() if k != LAUNCH_KEY})
        except OSError as error:
            print(f"autopilot: warning: index not updated: {error.strerror}", file=sys.stderr)
    return run_id
