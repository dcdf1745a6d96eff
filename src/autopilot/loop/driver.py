"""The driver: iterate an armed run (see ``arming``) until the policy ends it.

One iteration (SPEC §6): read the stop/pause flags, write ``iteration_start``, mark
git, save the prompt, start the agent in its own process group, stream its stdout
through the adapter's parser, mark git again, write ``commit_observed`` for each new
commit and one ``iteration_end``, store spend and counters in ``state.json``, then ask
``policy.decide`` what follows. Everything a restart needs is in ``state.json``; the
log is for people and ``fold``. Signal handlers only set flags (``Interrupts``).
"""

from __future__ import annotations

import copy
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autopilot.agents.base import (
    AgentAdapter,
    AgentEventKind,
    ErrorKind,
    InvocationRequest,
    SessionUsage,
    agent_environment,
    apply_usage_baseline,
)
from autopilot.agents.failures import needs_payment
from autopilot.config import RunConfig
from autopilot.core.delivery import (
    DeliveryLedger,
    Handoff,
    MessageKind,
    budget_warnings,
    conclude,
)
from autopilot.errors import StateFileError, UsageError
from autopilot.loop import git
from autopilot.loop.arming import (
    PromptSource,
    RunResult,
    exit_code_for,
    process_start_time,
    status_for,
)
from autopilot.loop.clock import Clock
from autopilot.loop.counters import counter_change, counters_from_state
from autopilot.loop.locks import ProjectLock, RunLocks
from autopilot.loop.outcome import (
    digest_of,
    error_text_of,
    failure_signature,
    outcome_of,
    progress_of,
    response_of,
    sane_report,
)
from autopilot.loop.policy import (
    Action,
    Decision,
    IterationFacts,
    Outcome,
    Reason,
    budget_note,
    budget_reached,
    decide,
)
from autopilot.loop.process import EndedBy, ProcessLimits, end_process_group_of, run_agent_process
from autopilot.loop.recovery import (
    charge_interrupted_attempt,
    close_unrecorded_attempt,
    reconcile_terminal,
    remove_stale_temp_files,
)
from autopilot.loop.signals import Interrupts
from autopilot.runtime.delivery import Delivery
from autopilot.runtime.notify import Notifier, notification_for
from autopilot.store import memory
from autopilot.store.events import EventLog, EventType, excerpt
from autopilot.store.files import read_prompt_file
from autopilot.store.paths import run_dir
from autopilot.store.private import make_private_dir, write_private
from autopilot.store.project_files import is_off, memory_path
from autopilot.store.state import RunStatus, StateStore

_FLAG_POLL_SECONDS = 0.5
_OWNED_FIELDS = ("spend", "loop", "iter", "iterationOpen", "sessionId", "usageBaseline", "config")
"""Fields only the driver writes while it runs; an outside change is undone and logged."""
_STATE_POLL_SECONDS = 1.0


@dataclass
class _Iteration:
    number: int
    prompt: str
    started_mono: float
    before: git.TreeMark
    folder: Path
    handoff: Handoff | None = None
    agent_pid: int | None = None
    tool_calls: int = 0
    texts: list[str] = field(default_factory=list)


class Driver:
    """Drives one armed run to its terminal event.

    Args:
        root: The runs root.
        run_id: The run to drive (armed, not terminated).
        adapter: The agent adapter.
        clock: Wall and monotonic time.
        interrupts: Flags set by signal handlers.
        on_event: Called with every event written (for the plain or live view).
        base_env: The environment agents inherit (default ``os.environ``).
        project_lock: The work tree's lock, if the caller already holds it.
    """

    def __init__(
        self,
        root: Path,
        run_id: str,
        adapter: AgentAdapter,
        clock: Clock,
        interrupts: Interrupts,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        base_env: dict[str, str] | None = None,
        project_lock: ProjectLock | None = None,
    ) -> None:
        self.root = root
        self.run_id = run_id
        self.folder = run_dir(root, run_id)
        self.store = StateStore(self.folder / "state.json")
        self.adapter = adapter
        self.clock = clock
        self.interrupts = interrupts
        self.on_event = on_event
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.state = self.store.read()
        self._own: dict[str, Any] | None = None
        self.config = RunConfig.from_json(self.state.get("config") or {})
        self.policy = self.config.policy()
        self.prompt_source = PromptSource.from_json(self.state.get("prompt"))
        self.cwd = Path(str(self.state.get("cwd")))
        self.log = EventLog(self.folder / "events.jsonl", run_id, clock.now_ms)
        self._last_prompt: str | None = self.prompt_source.text
        self._last_state_read = 0.0
        self._parse_failures = 0
        self._locks = RunLocks(project_lock or ProjectLock(root, self.cwd), run_id, self.folder)
        self.delivery = Delivery(self.folder, self.log, self.cwd, clock, memory=True)
        self.notifier = Notifier(self.config.notify) if self.config.notify else None

    # -- state ---------------------------------------------------------------

    def _update(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        def guarded(s: dict[str, Any]) -> None:
            self._keep_own(s)
            change(s)

        self.state = self.store.update(guarded, fallback=self.state)
        self._own = {key: copy.deepcopy(self.state.get(key)) for key in _OWNED_FIELDS}
        return self.state

    def _refresh(self) -> dict[str, Any]:
        try:
            self.state = self._keep_own(self.store.read())
        except StateFileError as error:
            self._emit(EventType.WARNING, note=f"{error}; rewriting it from memory")
            self._update(lambda s: None)
        return self.state

    def _keep_own(self, on_disk: dict[str, Any]) -> dict[str, Any]:
        """While this driver runs, its own figures stand: what it last wrote of the
        fields only it writes (spend, counters, iteration, session, config) replaces
        whatever someone else (an agent) put in the file, and the change is logged."""
        if self._own is None:
            return on_disk
        changed = [key for key in _OWNED_FIELDS if on_disk.get(key) != self._own.get(key)]
        if changed:
            self._emit(
                EventType.WARNING,
                note=f"state.json's {', '.join(changed)} changed outside the driver; "
                "the driver's own figures stand",
                outsideChange=changed,
            )
            for key in changed:
                on_disk[key] = copy.deepcopy(self._own.get(key))
        return on_disk

    def _emit(self, event_type: EventType, **fields: Any) -> None:
        event = self.log.emit(event_type, **fields)
        if event is not None and self.notifier is not None:
            notification = notification_for(event, self.run_id)
            if notification is not None:
                self.notifier.send(notification)
        if event is not None and self.on_event is not None:
            try:
                self.on_event(event)
            except (OSError, ValueError):
                # The terminal or pipe went away; the run goes on, on the record.
                self.on_event = None

    # -- locks -----------------------------------------------------------------

    # -- the loop --------------------------------------------------------------

    def run(self) -> RunResult:
        """Iterate until a terminal event; returns how the run ended.

        Raises:
            RunLockedError: another driver holds the run or the project.
            UsageError: the run has already ended.
        """
        self._locks.acquire()
        try:
            # Checked under the lock: another driver may have just ended the run.
            self.state = reconcile_terminal(self.folder, self.store, self.log)
            if self.state.get("terminated"):
                raise UsageError(
                    f"run {self.run_id} has already ended ({self.state.get('terminationReason')})"
                )
            return self._run()
        finally:
            if self.notifier is not None:
                self.notifier.close()
                self._report_notify_failures()
            self.log.close()
            self._locks.release()

    def _report_notify_failures(self) -> None:
        if self.notifier is not None:
            for failure in self.notifier.drain_failures():
                self._emit(EventType.WARNING, note=failure)

    def _run(self) -> RunResult:
        pid = os.getpid()
        remove_stale_temp_files(self.folder)
        leftover = self.state.get("agentPid")
        if isinstance(leftover, int) and leftover != pid:
            end_process_group_of(leftover, self.state.get("agentStartTime"), self.run_id)
            self._recover_attempt()
        else:
            closed = close_unrecorded_attempt(
                self.folder, self.store, self.log, self.adapter, self.run_id
            )
            self.state = self.store.read()
            if closed is not None and self.on_event is not None:
                self.on_event(closed)

        ledger = self._repair_delivery()
        self._keep_memory(start=True)

        def attach(s: dict[str, Any]) -> None:
            s.update(pid=pid, pidStartTime=process_start_time(pid), host=socket.gethostname())
            s.update(agentPid=None, agentStartTime=None, status=RunStatus.RUNNING)
            s["delivery"] = ledger.to_json()

        self._update(attach)
        self._emit(
            EventType.DRIVER_START,
            pid=pid,
            agent=self.adapter.name,
            verifiedVersion=self.adapter.verified_version,
        )
        if git.mark(self.cwd).entries is None:
            self._emit(
                EventType.WARNING,
                note=f"{self.cwd} is not a git repository: progress is unknown, so "
                "stagnation counts only identical responses",
            )
        while True:
            ended = self._boundary()
            if ended is not None:
                return ended
            ended = self._one_iteration()
            if ended is not None:
                return ended

    def _ledger(self) -> DeliveryLedger:
        return DeliveryLedger.from_json(self.state.get("delivery"))

    def _repair_delivery(self) -> DeliveryLedger:
        try:
            return self.delivery.repair(self._ledger())
        except StateFileError as error:
            self._emit(EventType.WARNING, note=f"inbox: {error}")
            return self._ledger()

    def _deliver(self, base_prompt: str, number: int) -> tuple[str, Handoff | None]:
        """The one way anything beyond the base prompt reaches the agent."""
        try:
            return self.delivery.deliver(base_prompt, self._ledger(), number)
        except StateFileError as error:
            # Messages stay queued on disk; this attempt goes without them.
            self._emit(EventType.WARNING, iteration=number, note=f"inbox: {error}")
            return base_prompt, None

    def _recover_attempt(self) -> None:
        """Charge the attempt a dead driver left running, then start a new iteration."""
        event = charge_interrupted_attempt(self.store, self.log, self.adapter, self.state)
        self.state = self.store.read()
        if event is not None and self.on_event is not None:
            self.on_event(event)

    def _boundary(self) -> RunResult | None:
        """Honour stop and pause before starting an iteration; check budgets."""
        self._report_notify_failures()
        while True:
            state = self._refresh()
            if self.interrupts.stop or state.get("stopRequested"):
                return self._finish(EventType.ABORT, Reason.USER_STOPPED, self._stop_note())
            off = is_off(self.cwd)
            if not (state.get("paused") or off):
                break
            self._hold_paused("OFF file present" if off and not state.get("paused") else None)
        counters = counters_from_state(state, interrupted=self.interrupts.stop)
        reached = budget_reached(counters, self.policy, iterations=not state.get("iterationOpen"))
        if reached is not None:
            reason, budget = reached
            note = f"{budget_note(reason, budget)} (spend restored from state.json)"
            return self._finish(EventType.ABORT, reason, note)
        waiting_until = state.get("waitingUntil")
        if isinstance(waiting_until, int) and waiting_until > self.clock.now_ms():
            # A relaunch during a usage-limit wait waits out the rest of it.
            self._wait(
                Decision(
                    Action.WAIT,
                    "rate_limited",
                    note="resuming the wait after a restart",
                    wait_until_ms=waiting_until,
                )
            )
            return self._boundary()
        return None

    def _stop_note(self) -> str:
        reason = self.state.get("stopReason")
        if self.interrupts.stop and not self.state.get("stopRequested"):
            if self.interrupts.kill_now:
                return "interrupted by signal; the agent was ended"
            return "interrupted by signal"
        if self.state.get("stopNow"):
            return f"{reason or 'stop requested'} (--now: the agent was ended)"
        return str(reason) if reason else "stop requested"

    def _hold_paused(self, why: str | None) -> None:
        paused_at = self.clock.now_ms()

        def mark(s: dict[str, Any]) -> None:
            s["status"] = RunStatus.PAUSED
            if not s.get("pausedAt"):
                s["pausedAt"] = paused_at

        self._update(mark)
        self._emit(EventType.PAUSE, note=why, autopilotOn=False if is_off(self.cwd) else None)
        while True:
            self.clock.sleep(_FLAG_POLL_SECONDS)
            state = self._refresh()
            if self.interrupts.stop or state.get("stopRequested"):
                break
            if not state.get("paused") and not is_off(self.cwd):
                break

        def unmark(s: dict[str, Any]) -> None:
            if s.get("pausedAt"):
                s["totalPausedMs"] = int(s.get("totalPausedMs") or 0) + max(
                    0, self.clock.now_ms() - int(s["pausedAt"])
                )
                s["pausedAt"] = None
            s["status"] = RunStatus.RUNNING

        self._update(unmark)
        if not (self.interrupts.stop or self.state.get("stopRequested")):
            self._emit(EventType.RESUME)

    def _read_prompt(self) -> str:
        path = self.prompt_source.path
        if path is None:
            return self.prompt_source.text or ""
        try:
            text = read_prompt_file(path, project=self.cwd)  # a FIFO or /dev/zero is refused
        except OSError as error:
            if self._last_prompt is None:
                raise UsageError(f"cannot read prompt file {path}: {error.strerror}") from None
            self._emit(
                EventType.WARNING,
                note=f"prompt file {path} unreadable ({error.strerror}); using the last copy",
            )
            return self._last_prompt
        self._last_prompt = text
        return text

    def _one_iteration(self) -> RunResult | None:
        state = self.state
        number = int(state.get("iter") or 0) + (0 if state.get("iterationOpen") else 1)
        prompt, handoff = self._deliver(self._read_prompt(), number)
        folder = self.folder / f"iter-{number:04d}"
        attempt = 1
        while folder.exists():
            attempt += 1
            folder = self.folder / f"iter-{number:04d}.{attempt}"
        make_private_dir(folder)
        write_private(folder / "prompt.md", prompt.encode("utf-8", "replace"))
        it = _Iteration(number, prompt, self.clock.monotonic(), git.mark(self.cwd), folder)
        it.handoff = handoff
        self._emit(EventType.ITERATION_START, iteration=number)
        resume = (
            state.get("sessionId")
            if self.config.context == "continue" and self.adapter.supports_sessions
            else None
        )
        return self._launch(it, resume)

    def _launch(self, it: _Iteration, resume: str | None) -> RunResult | None:
        request = InvocationRequest(
            prompt=it.prompt,
            prompt_path=it.folder / "prompt.md",
            cwd=self.cwd,
            model=self.config.model,
            resume_session_id=resume,
            extra_args=tuple(self.state.get("extraArgs") or ()),
        )
        invocation = self.adapter.build_invocation(request)
        env = agent_environment(
            self.base_env,
            invocation,
            {
                "AUTOPILOT_RUN_ID": self.run_id,
                "AUTOPILOT_ITERATION": str(it.number),
            },
            needed=self.adapter.env_needed,
            exclude=self.config.env_exclude,
        )
        parser = self.adapter.new_parser()

        def on_line(line: str) -> None:
            try:
                events = parser.feed(line)
            except Exception:
                self._parse_failures += 1
                return
            for event in events:
                if event.subagent:
                    continue
                if event.kind is AgentEventKind.TEXT:
                    it.texts.append(event.text)
                    del it.texts[:-1]
                elif event.kind is AgentEventKind.TOOL_CALL:
                    # One substage per root tool call, as the seed's runner records them.
                    it.tool_calls += 1
                    self._emit(
                        EventType.SUBSTAGE,
                        iteration=it.number,
                        sub=it.tool_calls,
                        verb=(event.tool_name or "tool")[:32],
                        argsSummary=event.text,
                    )

        def on_start(pid: int) -> None:
            it.agent_pid = pid
            started = process_start_time(pid)
            handoff = it.handoff

            def open_attempt(s: dict[str, Any]) -> None:
                s.update(
                    iter=it.number,
                    iterationOpen=True,
                    status=RunStatus.RUNNING,
                    waitingUntil=None,
                    agentPid=pid,
                    agentStartTime=started,
                    attemptDir=str(it.folder),
                )
                if handoff is not None:
                    s["delivery"] = handoff.ledger.to_json()

            self._update(open_attempt)
            if handoff is not None:
                # At hand-off: the agent that received the messages has started.
                self.delivery.handed(handoff, it.number)
                it.handoff = Handoff(handoff.messages, (), handoff.ledger)

        result = run_agent_process(
            invocation.argv,
            cwd=self.cwd,
            env=env,
            stdin_data=invocation.stdin,
            stdout_path=it.folder / "stdout.log",
            stderr_path=it.folder / "stderr.log",
            on_line=on_line,
            result_seen=lambda: parser.report().result_seen,
            should_kill=self._should_kill,
            limits=self._limits(),
            on_start=on_start,
        )
        report = parser.report()
        exit_code = result.exit_code or 0
        if (
            result.ended_by is EndedBy.RESULT_GRACE
            and result.ended_by_driver
            and report.result_seen
        ):
            # It gave its final result and lingered; ending it was ours, not a failure.
            exit_code = 0
        classification = (
            self.adapter.classify(report, exit_code, result.stderr_tail)
            if result.ended_by is not EndedBy.LAUNCH_FAILED
            else None
        )
        # After classify, which may read a reset time from the agent's error text.
        report = sane_report(
            apply_usage_baseline(report, self._usage_baseline()), self.clock.now_ms()
        )
        if (
            classification is not None
            and not classification.ok
            and classification.error_kind is ErrorKind.SESSION_NOT_FOUND
            and resume is not None
        ):
            self._update(lambda s: s.update(sessionId=None))
            self._emit(
                EventType.WARNING,
                iteration=it.number,
                note=f"resuming session {resume} failed ({classification.message}); "
                "starting a fresh session",
            )
            return self._launch(it, None)
        outcome = outcome_of(result.ended_by, classification)
        if (
            outcome is Outcome.RATE_LIMITED
            and report.reset_at_ms is None
            and classification is not None
            and needs_payment(classification.message)
        ):
            # Out of credit is not a limit that resets: waiting would never end.
            outcome = Outcome.AGENT_ERROR
        return self._conclude(it, result, report, classification, outcome)

    def _usage_baseline(self) -> SessionUsage | None:
        """Session totals after the previous iteration (agents that report totals)."""
        stored = self.state.get("usageBaseline")
        if not isinstance(stored, dict) or not isinstance(stored.get("sessionId"), str):
            return None
        return SessionUsage(
            stored["sessionId"], int(stored.get("input") or 0), int(stored.get("output") or 0)
        )

    def _limits(self) -> ProcessLimits:
        timeout = self.config.iteration_timeout_seconds
        if self.policy.max_duration_ms is not None:
            spent = int((self.state.get("spend") or {}).get("activeMs") or 0)
            left = max(1.0, (self.policy.max_duration_ms - spent) / 1000)
            timeout = left if timeout is None else min(timeout, left)
        return ProcessLimits(
            timeout_seconds=timeout,
            idle_timeout_seconds=self.config.idle_timeout_seconds,
            result_grace_seconds=self.config.result_grace_seconds,
        )

    def _should_kill(self) -> bool:
        if self.interrupts.kill_now:
            return True
        now = time.monotonic()
        if now - self._last_state_read >= _STATE_POLL_SECONDS:
            self._last_state_read = now
            try:
                self.state = self._keep_own(self.store.read())
            except StateFileError:
                return False
        return bool(self.state.get("stopNow"))

    def _conclude(
        self,
        it: _Iteration,
        result: Any,
        report: Any,
        classification: Any,
        outcome: Outcome,
    ) -> RunResult | None:
        after = git.mark(self.cwd)
        commits = git.commits_between(self.cwd, it.before.head, after.head)
        for commit in commits:
            self._emit(
                EventType.COMMIT_OBSERVED,
                iteration=it.number,
                sha=commit.sha.lower(),
                subject=excerpt(commit.subject, 200),
                trailers=[excerpt(t, 200) for t in commit.trailers],
            )
        files_changed = git.changed_files(self.cwd, it.before, after)
        progress = progress_of(it.before, after)
        duration_ms = int((self.clock.monotonic() - it.started_mono) * 1000)
        response = response_of(report, it.texts[-1] if it.texts else None)
        digest = digest_of(response)
        error_text = error_text_of(outcome, result, classification, duration_ms)
        signature = failure_signature(outcome, error_text)
        in_tokens = report.input_tokens or 0
        out_tokens = report.output_tokens or 0
        cost = report.cost_usd or 0.0
        spends = outcome is not Outcome.RATE_LIMITED
        session_id = report.session_id
        totals = report.session_usage

        def record(s: dict[str, Any]) -> None:
            spend = s.setdefault("spend", {})
            tokens = spend.setdefault("tokens", {"input": 0, "output": 0})
            tokens["input"] = int(tokens.get("input") or 0) + in_tokens
            tokens["output"] = int(tokens.get("output") or 0) + out_tokens
            spend["costUsd"] = round(float(spend.get("costUsd") or 0.0) + cost, 6)
            spend["activeMs"] = int(spend.get("activeMs") or 0) + duration_ms
            if spends:
                spend["iterations"] = int(spend.get("iterations") or 0) + 1
            s["iter"] = it.number
            s["iterationOpen"] = not spends
            ledger = DeliveryLedger.from_json(s.get("delivery"))
            s["delivery"] = conclude(ledger, outcome_stands=spends).to_json()
            s["agentPid"] = None
            s["agentStartTime"] = None
            s["attemptDir"] = None
            if session_id and self.config.context == "continue":
                s["sessionId"] = session_id
            if s.get("stopNow"):
                s["stopRequested"] = True
            if totals is not None:
                s["usageBaseline"] = {
                    "sessionId": totals.session_id,
                    "input": totals.input_tokens,
                    "output": totals.output_tokens,
                }

        previous_session = self.state.get("sessionId")
        projected = copy.deepcopy(self.state)
        record(projected)
        facts = IterationFacts(
            number=it.number,
            outcome=outcome,
            final_message=report.final_message,
            response_digest=digest,
            tool_calls=report.tool_calls,
            progress=progress,
            prompt=it.prompt,
            error_signature=signature,
            error_text=error_text,
            duration_ms=duration_ms,
            reset_at_ms=report.reset_at_ms,
            fatal=classification is not None
            and not classification.ok
            and (
                classification.error_kind is ErrorKind.AUTH
                or (report.reset_at_ms is None and needs_payment(classification.message))
            ),
        )
        decision = decide(
            counters_from_state(projected, interrupted=self.interrupts.stop),
            facts,
            self.policy,
            self.clock.now_ms(),
        )
        counters = counter_change(decision, signature)

        def record_and_count(s: dict[str, Any]) -> None:
            record(s)
            counters(s)

        before_spend = dict(self.state.get("spend") or {})
        state = self._update(record_and_count)
        spend = state["spend"]
        self._retire_messages()
        self._warn_of_budgets(before_spend, spend)
        self._keep_memory()
        if session_id and session_id != previous_session and len(session_id) <= 64:
            self._emit(EventType.SESSION_ATTACHED, iteration=it.number, sessionId=session_id)
        if report.input_tokens is not None or report.cost_usd is not None:
            self._emit(
                EventType.USAGE_UPDATE,
                iteration=it.number,
                tokens=dict(spend["tokens"]),
                costUsd=spend["costUsd"],
            )
        self._emit(
            EventType.ITERATION_END,
            iteration=it.number,
            excerpt=excerpt(response),
            outcome=outcome.value,
            exitCode=result.exit_code,
            endedBy=result.ended_by.value,
            tokens=dict(spend["tokens"]),
            costUsd=spend["costUsd"],
            iterationTokens={"input": in_tokens, "output": out_tokens},
            iterationCostUsd=report.cost_usd,
            filesChanged=files_changed,
            commits=len(commits),
            toolCalls=report.tool_calls,
            progress=progress.value,
            sessionId=session_id if session_id and len(session_id) <= 64 else None,
            durationMs=duration_ms,
            error=excerpt(error_text) if error_text else None,
            oversizedLines=result.oversized_lines or None,
            rawOutput=result.write_error or ("truncated" if result.raw_truncated else None),
        )
        return self._apply(decision, it)

    def _keep_memory(self, *, start: bool = False) -> None:
        """The memory file (seed 003): put back if the agent deleted it, created empty at
        the run's start if there is none, and copied into the run folder."""
        try:
            if memory.restore_if_missing(self.cwd, self.folder):
                self._emit(
                    EventType.MEMORY_RESTORED,
                    note=f"{memory_path(self.cwd)} was gone; restored from the run's copy",
                )
            if start:
                memory.ensure_memory(self.cwd)
            memory.keep_copy(self.cwd, self.folder)
        except OSError as error:
            self._emit(EventType.WARNING, note=f"memory file: {error.strerror or error}")

    def _warn_of_budgets(self, before: dict[str, Any], after: dict[str, Any]) -> None:
        """A budget warning for the next iteration, through the one delivery path."""

        def amounts(spend: dict[str, Any]) -> dict[str, float]:
            tokens = spend.get("tokens") or {}
            total = int(tokens.get("input") or 0) + int(tokens.get("output") or 0)
            return {"cost_usd": float(spend.get("costUsd") or 0.0), "tokens": float(total)}

        limits = {"cost_usd": self.policy.max_cost_usd, "tokens": self.policy.max_tokens}
        for notice in budget_warnings(amounts(before), amounts(after), limits):
            try:
                self.delivery.notice(MessageKind.BUDGET_WARNING, notice)
            except (StateFileError, UsageError) as error:
                self._emit(EventType.WARNING, note=f"inbox: {error}")

    def _say_undelivered(self) -> None:
        """Messages still queued when the run ends never reach the agent: say so."""
        left = [*self.delivery.inbox.pending(), *self.delivery.inbox.taken()]
        if left:
            ids = ", ".join(m.id for m in left[:5]) + (", …" if len(left) > 5 else "")
            self._emit(
                EventType.WARNING,
                note=f"{len(left)} message(s) never reached the agent: the run ended first ({ids})",
            )

    def _retire_messages(self) -> None:
        ledger = self._ledger()
        if not ledger.retired:
            return
        try:
            left = self.delivery.retire(ledger)
        except StateFileError as error:
            self._emit(EventType.WARNING, note=f"inbox: {error}")
            return
        self._update(lambda s: s.update(delivery=left.to_json()))

    def _apply(self, decision: Decision, it: _Iteration) -> RunResult | None:
        if decision.stagnation_streak:
            self._emit(
                EventType.STAGNATION,
                iteration=it.number,
                streak=decision.stagnation_streak,
                limit=self.policy.stagnation_limit,
            )
        if decision.warning:
            self._emit(EventType.WARNING, iteration=it.number, note=decision.warning)
        if decision.action is Action.COMPLETE:
            return self._finish(EventType.COMPLETE, decision.reason or "", decision.note)
        if decision.action is Action.ABORT:
            note = decision.note
            if decision.reason == Reason.STAGNATION:
                model = f" with model {self.config.model}" if self.config.model else ""
                note = (
                    f"{note}: no diff, no commit, and the same answer or no tool call, "
                    f"from agent {self.adapter.name}{model}; check that this agent "
                    "and model can work in this repository"
                )
            elif decision.reason == Reason.USER_STOPPED:
                note = self._stop_note()
            return self._finish(EventType.ABORT, decision.reason or "", note)
        if decision.action in (Action.WAIT, Action.BACKOFF) and decision.wait_until_ms:
            self._wait(decision)
        return None

    def _wait(self, decision: Decision) -> None:
        until = int(decision.wait_until_ms or 0)
        waiting_status = (
            RunStatus.RATE_LIMITED if decision.action is Action.WAIT else RunStatus.WAITING
        )
        self._update(lambda s: s.update(status=waiting_status, waitingUntil=until))
        if decision.action is Action.WAIT:
            self._emit(EventType.RATE_LIMITED, waitingUntil=until, note=decision.note)
        else:
            self._emit(
                EventType.WARNING,
                note=f"backing off {max(0, until - self.clock.now_ms()) // 1000} s after: "
                f"{decision.note}",
                waitingUntil=until,
            )
        started = self.clock.monotonic()
        while self.clock.now_ms() < until:
            self.clock.sleep(
                min(_FLAG_POLL_SECONDS, max(0.0, (until - self.clock.now_ms()) / 1000))
            )
            state = self._refresh()
            if self.interrupts.stop or state.get("stopRequested") or state.get("paused"):
                break
        waited = int((self.clock.monotonic() - started) * 1000)

        still_limited = decision.action is Action.WAIT and self.clock.now_ms() < until

        def done(s: dict[str, Any]) -> None:
            spend = s.setdefault("spend", {})
            spend["waitingMs"] = int(spend.get("waitingMs") or 0) + waited
            # A pause during a limit wait keeps the reset time: after resume the
            # boundary waits out the rest instead of relaunching into the limit.
            s.update(status=RunStatus.RUNNING, waitingUntil=until if still_limited else None)

        self._update(done)

    def _finish(self, terminal: EventType, reason: str, note: str | None) -> RunResult:
        reason_text = str(reason.value if isinstance(reason, Reason) else reason)
        status = status_for(terminal.value, reason_text)
        self._say_undelivered()

        def end(s: dict[str, Any]) -> None:
            s.update(
                terminated=True,
                terminationReason=reason_text,
                terminationNote=note,
                status=status,
                iterationOpen=False,
                waitingUntil=None,
                agentPid=None,
                pid=None,
            )

        self._update(end)
        spend = self.state.get("spend") or {}
        self._emit(
            terminal,
            reason=reason_text,
            note=note,
            iteration=int(self.state.get("iter") or 0),
            tokens=spend.get("tokens"),
            costUsd=spend.get("costUsd"),
        )
        self.log.sync()
        return RunResult(
            self.run_id,
            terminal.value,
            reason_text,
            note,
            exit_code_for(terminal.value, reason_text),
        )
