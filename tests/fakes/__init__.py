"""Fakes for the driver's seams: a clock that sleeps in no time, an agent runner that
plays scripted output, a workspace whose changes and commits are scripted, a state
store that crashes where told, and a driver wired with them on a real run folder.

The driver, the adapter (Claude Code's parser), the store and the log are the real
ones; only processes, git and time are faked, so every path of the loop runs in the
test's own process, with no subprocess and no real sleep.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autopilot.agents.claude import ClaudeAdapter
from autopilot.config import RunConfig
from autopilot.core.vocabulary import EndedBy
from autopilot.loop.arming import arm_run
from autopilot.loop.driver import Driver
from autopilot.loop.process import ProcessResult
from autopilot.loop.runner import AgentWatch, RunRequest
from autopilot.loop.signals import Interrupts
from autopilot.store.run_state import PromptSource, RunState
from autopilot.store.state import StateStore
from autopilot.testkit.streamjson import StreamJson
from autopilot.workspace.git import Commit, TreeMark
from autopilot.workspace.history import HeadMove
from autopilot.workspace.taking import CheckpointFacts

START_MS = 1_800_000_000_000
NO_SUCH_PID = 2**22 + 1
"""Above Linux's largest ``pid_max``: never a live process."""


class FakeClock:
    """Wall and monotonic time that move only when slept through or advanced."""

    def __init__(self, now_ms: int = START_MS) -> None:
        self.ms = now_ms
        self.slept = 0.0

    def now_ms(self) -> int:
        """Epoch ms."""
        return self.ms

    def monotonic(self) -> float:
        """Seconds."""
        return self.ms / 1000

    def sleep(self, seconds: float) -> None:
        """Advance time instead of waiting."""
        self.advance(seconds)
        self.slept += seconds

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.ms += max(1, int(seconds * 1000))


class SimulatedCrash(BaseException):
    """The driver process dies here (``kill -9``): nothing after it runs."""


class FakeWorkspace:
    """A work tree whose edits and commits the scripted agent makes."""

    def __init__(self, *, repository: bool = True) -> None:
        self.repository = repository
        self.version = 0
        self.touched: set[str] = set()
        self.commits: list[Commit] = []
        self.checkpoints: list[CheckpointFacts] = []
        self.deleted = False
        self.warnings: list[str] = []

    def edit(self) -> None:
        """Change a file."""
        self.version += 1

    def commit(self, subject: str) -> None:
        """Commit the work tree."""
        sha = f"{len(self.commits) + 1:040x}"
        self.commits.append(Commit(sha, subject, ()))

    @property
    def head(self) -> str | None:
        return self.commits[-1].sha if self.commits else None

    def mark(self) -> TreeMark:
        """See ``Workspace.mark``."""
        if not self.repository:
            return TreeMark(None, None)
        touched = {path: "touched" for path in self.touched}
        return TreeMark(self.head, {"file.txt": str(self.version), **touched})

    def new_commits(self, before: TreeMark, after: TreeMark) -> list[Commit]:
        """See ``Workspace.new_commits``."""
        shas = [c.sha for c in self.commits]
        start = shas.index(before.head) + 1 if before.head in shas else 0
        end = shas.index(after.head) + 1 if after.head in shas else 0
        return self.commits[start:end]

    def changed_files(self, before: TreeMark, after: TreeMark) -> int | None:
        """See ``Workspace.changed_files``."""
        paths = self.changed_paths(before, after)
        return None if paths is None else len(paths)

    def changed_paths(self, before: TreeMark, after: TreeMark) -> list[str] | None:
        """See ``Workspace.changed_paths``: ``file.txt`` and the ``touched`` paths."""
        if after.entries is None:
            return None
        old = before.entries or {}
        return sorted(p for p in {*old, *after.entries} if old.get(p) != after.entries.get(p))

    def head_move(self, before: TreeMark, after: TreeMark) -> HeadMove | None:
        """See ``Workspace.head_move``: commits are only ever added here."""
        return None

    def checkpoint(self, iteration: int) -> CheckpointFacts | None:
        """See ``Workspace.checkpoint``: one fake commit per checkpoint, kept in order."""
        if not self.repository or self.deleted:
            return None
        name = "baseline" if iteration == 0 else f"iter-{iteration:04d}"
        if iteration == 0 and self.checkpoints:
            return None
        sha = f"c{len(self.checkpoints) + 1:039x}"
        facts = CheckpointFacts(name, iteration, sha, 1, (f"M file.txt@{self.version}",))
        self.checkpoints.append(facts)
        return facts

    def problem(self) -> str | None:
        """See ``Workspace.problem``."""
        return None

    def gone(self) -> str | None:
        """See ``Workspace.gone``."""
        return "the work tree was deleted" if self.deleted else None

    def take_warnings(self) -> list[str]:
        """See ``Workspace.take_warnings``."""
        warnings, self.warnings = self.warnings, []
        return warnings

    def keep_branch(self) -> str | None:
        """See ``Workspace.keep_branch``: no branch is ever deleted here."""
        return None


@dataclass
class Scripted:
    """One scripted attempt of the agent.

    Attributes:
        lines: Its stdout lines.
        exit_code: Its exit status.
        seconds: How long it runs (the fake clock advances by this).
        ended_by: How the process ended, unless a stop ends it first.
        on_start: Called once it runs (edit the workspace, write files…).
        crash: The driver dies while the agent runs, after its output was saved.
        launch_error: It cannot be started.
        stderr: What it prints on stderr.
    """

    lines: list[str] = field(default_factory=list)
    exit_code: int = 0
    seconds: float = 2.0
    ended_by: EndedBy = EndedBy.EXIT
    on_start: Callable[[RunRequest], None] | None = None
    crash: bool = False
    launch_error: str | None = None
    stderr: str = ""


class FakeRunner:
    """Plays scripted attempts in order (the last one repeats) instead of processes.

    Attributes:
        requests: Every request it was given, in order.
    """

    def __init__(self, clock: FakeClock, attempts: list[Scripted]) -> None:
        self.clock = clock
        self.attempts = attempts
        self.requests: list[RunRequest] = []

    def run(self, request: RunRequest, watch: AgentWatch) -> ProcessResult:
        """See ``AgentRunner.run``."""
        index = min(len(self.requests), len(self.attempts) - 1)
        script = self.attempts[index]
        self.requests.append(request)
        if script.launch_error is not None:
            return ProcessResult(
                EndedBy.LAUNCH_FAILED, None, script.launch_error, script.launch_error, 0, 0, 0.0
            )
        watch.on_start(NO_SUCH_PID)
        watch.opened()  # the attempt is open in state.json before the script acts
        if script.on_start is not None:
            script.on_start(request)
        request.attempt.stdout.write_text("".join(line + "\n" for line in script.lines))
        request.attempt.stderr.write_text(script.stderr)
        step = script.seconds / (len(script.lines) + 1)
        for line in script.lines:
            self.clock.advance(step)
            if watch.should_kill():
                return self._result(EndedBy.KILLED, -9, script)
            watch.on_line(line)
        self.clock.advance(step)
        if script.crash:
            raise SimulatedCrash
        if watch.should_kill():
            return self._result(EndedBy.KILLED, -9, script)
        return self._result(script.ended_by, script.exit_code, script)

    @staticmethod
    def _result(ended_by: EndedBy, exit_code: int, script: Scripted) -> ProcessResult:
        return ProcessResult(ended_by, exit_code, None, script.stderr, 0, 0, script.seconds)


class CrashingStore(StateStore):
    """A ``state.json`` store whose writer dies before a write ``crash_before`` picks.

    Args:
        path: The ``state.json``.
        crash_before: Given the state about to be written; True: the driver dies.
    """

    def __init__(self, path: Path, crash_before: Callable[[RunState], bool]) -> None:
        super().__init__(path)
        self.crash_before = crash_before

    def update(self, change: Callable[[RunState], None], **kwargs: Any) -> RunState:
        """``StateStore.update``, or a crash before the write."""

        def checked(state: RunState) -> None:
            change(state)
            if self.crash_before(state):
                raise SimulatedCrash

        return super().update(checked, **kwargs)


def crash_once_logged(monkeypatch: Any, steps: int) -> None:
    """The driver dies as soon as its ``steps``-th step's events (``decision_applied``
    with them) are on the log, before anything else is written: the step's state
    write never happens, held (``RunRecord.apply``) or not."""
    from autopilot.store.events import EventLog

    append = EventLog.emit_all
    logged = [0]

    def emit_all(self: EventLog, events: Any) -> Any:
        written = append(self, events)
        if any(str(kind) == "decision_applied" for kind, _ in events):
            logged[0] += 1
            if logged[0] == steps:
                raise SimulatedCrash
        return written

    monkeypatch.setattr(EventLog, "emit_all", emit_all)


class NoLocks:
    """Locks for a driver alone in its test."""

    def acquire(self) -> None:
        """Nothing to take."""

    def release(self) -> None:
        """Nothing to release."""


def claude_lines(
    final: str,
    *,
    session: str = "00000000-0000-4000-8000-000000000001",
    tools: int = 1,
    cost_usd: float = 0.01,
    input_tokens: int = 100,
    output_tokens: int = 10,
    is_error: bool = False,
    api_error_status: int | None = None,
) -> list[str]:
    """One Claude Code session's stream-json lines: init, tool calls, final result."""
    stream = StreamJson(session, "/work")
    lines = [stream.init()]
    for number in range(tools):
        lines.append(stream.tool_use(f"tool_{number}", "Bash", {"command": f"step {number}"}))
        lines.append(stream.tool_result(f"tool_{number}", "ok"))
    lines.append(stream.text(final))
    lines.append(
        stream.result(
            final,
            is_error=is_error,
            cost_usd=cost_usd,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            api_error_status=api_error_status,
        )
    )
    return lines


@dataclass
class Rig:
    """A real run folder armed for a driver with fake seams."""

    root: Path
    run_id: str
    clock: FakeClock
    workspace: FakeWorkspace
    interrupts: Interrupts = field(default_factory=Interrupts)

    @property
    def folder(self) -> Path:
        return self.root / self.run_id

    def driver(
        self,
        attempts: list[Scripted],
        *,
        store: StateStore | None = None,
        adapter: Any = None,
        base_env: dict[str, str] | None = None,
    ) -> tuple[Driver, FakeRunner]:
        """A driver for the run, playing ``attempts`` (its environment: ``base_env``,
        else a bare ``PATH``)."""
        runner = FakeRunner(self.clock, attempts)
        driver = Driver(
            self.root,
            self.run_id,
            adapter or ClaudeAdapter(sys.executable),
            self.clock,
            self.interrupts,
            locks=NoLocks(),
            base_env=base_env or {"PATH": "/usr/bin"},
            runner=runner,
            workspace=self.workspace,
            store=store,
        )
        return driver, runner


def arm(tmp_path: Path, config: RunConfig | None = None, *, prompt: str = "work") -> Rig:
    """Arm a run in ``tmp_path/runs`` for ``tmp_path/work`` (no git, no process)."""
    root = tmp_path / "runs"
    root.mkdir(exist_ok=True)
    cwd = tmp_path / "work"
    cwd.mkdir(exist_ok=True)
    clock = FakeClock()
    run_id = arm_run(root, config or RunConfig(), PromptSource(text=prompt), cwd, clock)
    return Rig(root, run_id, clock, FakeWorkspace())
