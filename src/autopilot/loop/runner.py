"""The agent runner: start one agent process for an attempt and read it to its end.

``SubprocessRunner`` is the real one (``loop.process``: own session, bytes read
with no line limit, every timeout enforced, nothing it started left running); tests
inject a fake that feeds scripted lines, so the driver runs in-process with no
subprocess and no sleep.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from msgspec import Struct

from autopilot.loop.cgroup import AgentCgroup, warm_up
from autopilot.loop.process import ProcessLimits, ProcessResult, run_agent_process
from autopilot.loop.sentinel import Sentinel
from autopilot.loop.subreaper import become_subreaper_soon
from autopilot.store.rundir import AttemptDir


class RunRequest(Struct, frozen=True):
    """One agent process to run.

    Attributes:
        argv: Program and arguments (never a shell string).
        env: The complete environment.
        stdin: Written to stdin, then closed; None gives ``/dev/null``.
        cwd: The work tree.
        attempt: Where the raw stdout and stderr are copied.
        limits: Timeouts and caps.
        run_id: The run, naming its cgroup (``autopilot-<runId>``) where the
            machine gives one; empty: none.
    """

    argv: list[str]
    env: Mapping[str, str]
    stdin: bytes | None
    cwd: Path
    attempt: AttemptDir
    limits: ProcessLimits
    run_id: str = ""


class AgentWatch(Struct, frozen=True):
    """What a runner tells the driver, and asks it, while the agent runs.

    Attributes:
        on_line: Called with each stdout line (decoded, no newline).
        result_seen: True once the agent's final result has arrived.
        should_kill: Polled; True ends the process group now.
        on_start: Called with the agent's pid once it runs; the attempt is then
            opened in ``state.json`` while the agent runs.
        opened: Waits until that write is done (a runner that acts for the agent
            before its first line, as the test doubles do, calls it first).
    """

    on_line: Callable[[str], None]
    result_seen: Callable[[], bool]
    should_kill: Callable[[], bool]
    on_start: Callable[[int], None]
    opened: Callable[[], None] = lambda: None


class AgentRunner(Protocol):
    """Runs agent processes."""

    def run(self, request: RunRequest, watch: AgentWatch) -> ProcessResult:
        """Run ``request`` to its end, telling ``watch``; never raises for the
        agent's sake."""
        ...


class SubprocessRunner:
    """Runs the agent as a real process (``loop.process.run_agent_process``), in the
    run's cgroup where the machine gives one (``AUTOPILOT_CGROUP=off``: never). The
    cgroup is emptied after each agent and kept for the next one, watched by the run's
    sentinel (``loop.sentinel``: started with the cgroup, again if it died); ``close``
    stands the sentinel down and removes the cgroup (a driver that died leaves it to
    the sentinel, and what is left to its relaunch: ``leftovers.end_leftovers``).
    """

    def __init__(self) -> None:
        # The kernel's wait before this process's first move between cgroups begins
        # now, in a thread, while the driver starts (``cgroup.warm_up``); so does the
        # subreaper's ``ctypes``.
        warm_up(os.environ)
        become_subreaper_soon()
        self._cgroups: dict[str, AgentCgroup] = {}
        self._sentinels: dict[str, Sentinel] = {}

    def run(self, request: RunRequest, watch: AgentWatch) -> ProcessResult:
        """See ``AgentRunner.run``."""
        cgroup = self._cgroups.get(request.run_id)
        if cgroup is None or not os.path.isdir(cgroup.path):  # made once, again if removed
            cgroup = AgentCgroup.for_run(request.run_id, os.environ) if request.run_id else None
        keep_watch = None
        if cgroup is not None:
            self._cgroups[request.run_id] = cgroup
            keep_watch = functools.partial(self._watch, request.run_id, cgroup)
        return run_agent_process(
            request.argv,
            cwd=request.cwd,
            env=request.env,
            stdin_data=request.stdin,
            stdout_path=request.attempt.stdout,
            stderr_path=request.attempt.stderr,
            on_line=watch.on_line,
            result_seen=watch.result_seen,
            should_kill=watch.should_kill,
            limits=request.limits,
            on_start=watch.on_start,
            cgroup=cgroup,
            keep_cgroup=True,
            keep_watch=keep_watch,
        )

    def _watch(self, run_id: str, cgroup: AgentCgroup) -> bool:
        """Is a sentinel watching ``cgroup``? Starts one where none is."""
        sentinel = self._sentinels.get(run_id)
        if sentinel is not None and sentinel.watching():
            return True
        if sentinel is not None:  # someone killed or stopped it: a new one
            sentinel.stand_down()
        started = Sentinel.start(cgroup, run_id) if cgroup.usable else None
        if started is None:
            self._sentinels.pop(run_id, None)
            return False
        self._sentinels[run_id] = started
        return True

    def close(self) -> None:
        """Stand the sentinels down, and remove the cgroups its agents ran in (each
        emptied when its agent ended)."""
        for sentinel in self._sentinels.values():
            sentinel.stand_down()
        self._sentinels.clear()
        for cgroup in self._cgroups.values():
            cgroup.remove()
        self._cgroups.clear()


class DriverLocks(Protocol):
    """What a driver holds while it drives (see ``runtime.locks.RunLocks``)."""

    def acquire(self) -> None:
        """Take the locks, or raise ``RunLockedError``."""
        ...

    def release(self) -> None:
        """Release them."""
        ...
