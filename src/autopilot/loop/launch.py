"""The agent phase of an attempt: the adapter's invocation, the agent's environment,
its output streamed through the adapter's parser (one ``substage`` per root tool
call), and the attempt opened in ``state.json`` once the agent runs."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from autopilot.agents.base import AgentAdapter, InvocationRequest, StreamParser
from autopilot.agents.environment import agent_environment, with_autopilot_on_path
from autopilot.core.markers import MarkerState, finish_markers, scan_markers
from autopilot.core.vocabulary import AgentEventKind, EndedBy, EventType, RunStatus
from autopilot.loop.identity import process_start_time, start_time_now
from autopilot.loop.process import ProcessLimits, ProcessResult
from autopilot.loop.record import RunRecord
from autopilot.loop.runner import AgentRunner, AgentWatch, RunRequest
from autopilot.store.private import write_private
from autopilot.store.run_state import RunState
from autopilot.store.rundir import WORK_ITEM_FILE, AttemptDir


class HandOff(Protocol):
    """What the agent is handed beside its prompt (``loop.briefing.Briefing``)."""

    def hand_off(self, state: RunState) -> None:
        """In the state write that opens the attempt: record what it was handed."""
        ...

    def handed(self, iteration: int) -> None:
        """Once that write is done (``message_delivered``)."""
        ...


def _scripts_dir() -> Path:
    """The folder of the ``autopilot`` script this process runs as, when it was started
    by its path (``sys.argv[0]`` of a console script, as the shell found it on ``PATH``
    or as typed); else this interpreter's folder when it holds an ``autopilot`` (a
    virtual environment's ``bin``, as ``python -m autopilot`` runs in one); else this
    interpreter's console scripts' folder (``sysconfig`` and its data, some 4 ms to
    load). Asked only when the agent's ``PATH`` has no ``autopilot``."""
    started = sys.argv[0] if sys.argv else ""
    if os.path.isabs(started) and os.path.basename(started) == "autopilot":
        return Path(started).parent
    beside = Path(sys.executable).parent / "autopilot"
    if sys.executable and beside.is_file() and os.access(beside, os.X_OK):
        return beside.parent
    import sysconfig

    return Path(sysconfig.get_path("scripts"))


class Launcher:
    """Starts the agent of each attempt through the injected runner.

    Args:
        adapter: The agent adapter, guarded (``agents.guard``: its parser never raises).
        runner: Starts agent processes.
        record: The driver's record (events, the attempt opened in the state).
        cwd: The work tree.
        base_env: The environment agents inherit (default ``os.environ``), with this
            autopilot's scripts folder on its ``PATH`` if it has no ``autopilot``
            (``agents.environment.with_autopilot_on_path``).
        run_id: Given to the agent as ``AUTOPILOT_RUN_ID`` (its run folder is not).
        should_kill: Polled while the agent runs; True ends it now.
        handoff: Told when an attempt opens (the messages it is handed).
    """

    def __init__(
        self,
        adapter: AgentAdapter,
        runner: AgentRunner,
        record: RunRecord,
        cwd: Path,
        base_env: Mapping[str, str] | None,
        run_id: str,
        *,
        should_kill: Callable[[], bool],
        handoff: HandOff,
    ) -> None:
        self.adapter = adapter
        self.runner = runner
        self.record = record
        self.cwd = cwd
        self.base_env = with_autopilot_on_path(
            os.environ if base_env is None else base_env, _scripts_dir
        )
        self.run_id = run_id
        self.should_kill = should_kill
        self.handoff = handoff
        self._markers = MarkerState()

    def limits(self) -> ProcessLimits:
        """The attempt's limits: a duration budget also caps the wall-clock timeout."""
        config, spent_ms = self.record.state.config, self.record.state.spend.active_ms
        timeout = config.iteration_timeout_seconds
        if config.max_duration_seconds:
            left = max(1.0, config.max_duration_seconds - spent_ms / 1000)
            timeout = left if timeout is None else min(timeout, left)
        return ProcessLimits(
            timeout_seconds=timeout,
            idle_timeout_seconds=config.idle_timeout_seconds,
            result_grace_seconds=config.result_grace_seconds,
        )

    def resume_session(self) -> str | None:
        """The session to resume (``--continue``), if a valid one is stored."""
        session = self.record.state.session_id
        if session is None or self.record.state.config.context != "continue":
            return None
        if not self.adapter.supports_sessions:
            return None
        if not self.adapter.valid_session_id(session):
            self.record.emit(
                EventType.WARNING,
                note=f"stored session id {session[:80]!r} is not one {self.adapter.name} "
                "makes; starting a fresh session",
            )
            self.record.update(lambda s: setattr(s, "session_id", None))
            return None
        return session

    def run(
        self,
        number: int,
        prompt: str,
        attempt: AttemptDir,
        resume: str | None,
        texts: list[str],
    ) -> tuple[ProcessResult, StreamParser]:
        """Run one attempt of iteration ``number`` to its end.

        Args:
            number: The iteration.
            prompt: Its prompt (saved in ``attempt.prompt``).
            attempt: The attempt's folder.
            resume: The session to resume, if any.
            texts: Receives the last root assistant text.

        Returns:
            How the process ended, and the parser holding the agent's report. An
            invocation the adapter cannot build (a prompt too long for argv, an
            option refused) is a ``LAUNCH_FAILED`` result, never an exception.
        """
        parser = self.adapter.new_parser()
        config = self.record.state.config
        request = InvocationRequest(
            prompt=prompt,
            prompt_path=attempt.prompt,
            cwd=self.cwd,
            model=config.model,
            resume_session_id=resume,
            extra_args=self.record.state.extra_args,
        )
        try:
            invocation = self.adapter.build_invocation(request)
        except Exception as error:  # a prompt too long for argv, an option refused
            message = f"cannot start {self.adapter.name}: {error}"
            write_private(attempt.stderr, (message + "\n").encode("utf-8", "replace"))
            return ProcessResult(EndedBy.LAUNCH_FAILED, None, message, message, 0, 0, 0.0), parser
        started_on = None
        if (attempt.path / WORK_ITEM_FILE).exists():  # a backlog run's item, before the agent
            from autopilot.loop.backlog_recovery import read_started

            started_on = read_started(attempt.path)
        env = agent_environment(
            self.base_env,
            invocation,
            {
                "AUTOPILOT_RUN_ID": self.run_id,
                "AUTOPILOT_ITERATION": str(number),
                **(started_on.agent_env() if started_on is not None else {}),
            },
            needed=self.adapter.env_needed,
            exclude=config.env_exclude,
        )
        tool_calls = 0

        def on_line(line: str) -> None:
            nonlocal tool_calls
            self.record.collect(block=False)  # the attempt's opening, once written
            for event in parser.feed(line):  # a guarded parser (``agents.guard``)
                if event.subagent:
                    continue
                if event.kind is AgentEventKind.TEXT:
                    texts[:] = [event.text]
                    self._markers, found = scan_markers(self._markers, event.text)
                    self._emit_markers(number, found)
                elif event.kind is AgentEventKind.TOOL_CALL:
                    # One substage per root tool call, as the Node tool's runner records them.
                    tool_calls += 1
                    self.record.emit(
                        EventType.SUBSTAGE,
                        iteration=number,
                        sub=tool_calls,
                        verb=(event.tool_name or "tool")[:32],
                        argsSummary=event.text,
                    )

        def on_start(pid: int) -> None:
            started = start_time_now() or process_start_time(pid)

            def open_attempt(s: RunState) -> None:
                s.iteration, s.iteration_open = number, True
                s.status, s.waiting_until_ms = RunStatus.RUNNING, None
                s.agent_pid, s.agent_start_time = pid, started
                s.attempt_dir = str(attempt.path)
                self.handoff.hand_off(s)

            # Written while the agent runs; the hand-off is logged once it is done.
            self.record.open_soon(open_attempt, then=lambda: self.handoff.handed(number))

        request_run = RunRequest(
            invocation.argv, env, invocation.stdin, self.cwd, attempt, self.limits(), self.run_id
        )
        watch = AgentWatch(
            on_line,
            lambda: parser.report().result_seen,
            self.should_kill,
            on_start,
            self.record.collect,
        )
        self.record.sync_soon()  # the held step's log fsync, while the agent starts
        result = self.runner.run(request_run, watch)
        self._markers, found = finish_markers(self._markers, ok=result.exit_code == 0)
        self._emit_markers(number, found)
        return result, parser

    def _emit_markers(self, number: int, found: list[dict[str, object]]) -> None:
        """Progress markers in the root agent's text, as stage events (``core.markers``)."""
        for marker in found:
            fields = {k: v for k, v in marker.items() if k != "type"}
            self.record.emit(EventType(str(marker["type"])), iteration=number, **fields)
