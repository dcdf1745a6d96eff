"""``autopilot run --backlog --parallel N``: the checks of its flags, its lanes armed
and started, and the lanes followed until the run ends (``runtime.parallel``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from autopilot.cli.echo import say
from autopilot.config import RunConfig
from autopilot.errors import AutopilotError, UsageError
from autopilot.loop.clock import SystemClock
from autopilot.store.paths import run_dir
from autopilot.store.run_state import PromptSource


def lanes_wanted(text: str | None, *, backlog: bool, worktree: bool | None) -> int | None:
    """The number of lanes ``--parallel`` asks for (None: no ``--parallel``).

    Raises:
        UsageError: not a whole number of 1 or more, without ``--backlog``, or with
            ``--no-worktree``.
    """
    if text is None:
        return None
    try:
        lanes = int(text.strip())
    except ValueError:
        lanes = 0
    if lanes < 1:
        raise UsageError(f"--parallel takes a number of agents of 1 or more, got {text!r}")
    if not backlog:
        raise UsageError("--parallel goes with --backlog: N agents drain one backlog")
    if worktree is False:
        raise UsageError("--parallel runs each agent in a worktree of its own; drop --no-worktree")
    return lanes


def lanes_to_start(cwd: Path, root: Path, lanes: int) -> int:
    """``lanes``, or fewer when fewer work items are ready (said in one line).

    Raises:
        UsageError: no work item is ready to start.
    """
    from autopilot.core.ready_queue import ready_queue  # not for a run without lanes
    from autopilot.store.backlog import Backlog

    ready = len(ready_queue(Backlog(cwd, root / ".locks").read().items))
    if ready == 0:
        raise UsageError(
            "no work item in .autopilot/tasks.jsonl is ready to start (autopilot tasks list)"
        )
    if ready < lanes:
        say(
            f"autopilot: {lanes} agents asked for but {ready} work item"
            f"{' is' if ready == 1 else 's are'} ready: starting {ready}",
            err=True,
        )
        return ready
    return lanes


def run_parallel(
    root: Path,
    config: RunConfig,
    source: PromptSource,
    cwd: Path,
    *,
    lanes: int,
    extra_args: tuple[str, ...],
    command: tuple[str, ...],
    detach: bool,
    show_limits: Callable[[str], None],
) -> int:
    """Arm the parallel run and its lanes, start each lane's supervisor, and follow
    them here (or return at once with ``detach``); returns the exit code."""
    import signal

    from autopilot import control
    from autopilot.runtime.detach import spawn_supervisor
    from autopilot.runtime.parallel import arm_parallel, follow
    from autopilot.runtime.run_result import ending_line
    from autopilot.store.rundir import RunDir
    from autopilot.store.state import read_state
    from autopilot.workspace.repo import open_repository
    from autopilot.workspace.worktrees import RunWorktree

    clock = SystemClock()
    open_repository(cwd)  # not in a repository: said before anything else
    count = lanes_to_start(cwd, root, lanes)
    parent, lane_ids = arm_parallel(
        root, config, source, cwd, clock, lanes=count, extra_args=extra_args, command=command
    )
    place = RunWorktree.from_json(read_state(RunDir(run_dir(root, parent)).state).extra["worktree"])
    assert place is not None
    show_limits(parent)
    say(
        f"autopilot: {count} agents, each in a worktree of its own, merging into branch "
        f"{place.branch} (budgets are for all of them together)"
    )
    try:
        for lane_id in lane_ids:
            supervisor = spawn_supervisor(root, lane_id)
            say(f"autopilot: agent run {lane_id} started (supervisor pid {supervisor})")
    except BaseException:
        # One agent cannot start: none goes on alone. Those not started end here,
        # those started stop now, and the run ends once they have.
        with contextlib.suppress(AutopilotError):
            control.stop(run_dir(root, parent), clock, now=True, reason="an agent could not start")
        raise
    if detach:
        say(f"autopilot: follow it: autopilot status {parent}; stop it: autopilot stop {parent}")
        return 0
    asked: list[int] = []

    def heard(signum: int, frame: object) -> None:
        # Like a single run: the first Ctrl-C (or SIGTERM) stops at the boundary, a
        # second one ends every agent's attempt now.
        asked.append(signum)
        if len(asked) == 1:
            say(
                "autopilot: stop heard: every agent stops when its iteration ends "
                "(Ctrl-C again to stop them now)",
                err=True,
            )
        elif len(asked) == 2:
            say("autopilot: stopping every agent now", err=True)

    signal.signal(signal.SIGINT, heard)
    signal.signal(signal.SIGTERM, heard)

    def stop_lanes(ids: list[str], now: bool) -> None:
        for lane_id in ids:
            try:
                control.stop(run_dir(root, lane_id), clock, now=now)
            except UsageError:
                continue

    result = follow(
        root, parent, clock, echo=say, stops_asked=lambda: len(asked), stop_lanes=stop_lanes
    )
    say(ending_line(result))
    say(f"autopilot: merge it with: autopilot merge {parent}")
    return result.exit_code
