"""The agent adapter interface: what the loop needs from each agent CLI.

An adapter builds the argv and environment for one iteration, turns each line of
the agent's stdout into normalised ``AgentEvent`` values through a ``StreamParser``,
and classifies how the iteration ended. The loop never sees a vendor format; it
sees ``AgentEvent`` and ``IterationReport`` only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Protocol, TypeGuard

from msgspec import Struct, field

from autopilot.core.redact import redact
from autopilot.core.structs import replace
from autopilot.core.vocabulary import AgentEventKind, ErrorKind
from autopilot.errors import AgentNotFoundError

MAX_ARG_BYTES = 131_071
"""The longest single argv element Linux accepts, in bytes: ``MAX_ARG_STRLEN``
(32 pages, 128 KiB) less the terminating NUL. ``execve`` fails with E2BIG above it."""

SESSION_ID_MAX_CHARS = 128
"""The longest session id accepted from an agent's output or ``state.json``."""

UUID_SHAPE = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
"""A UUID in its canonical text form: the session ids of Claude Code, Codex,
pi, Gemini CLI and Copilot CLI."""

WallClock = Callable[[], datetime]
"""A function returning the current time as an aware ``datetime`` (local zone)."""


class AgentEvent(Struct, frozen=True):
    """One thing the agent did, in vendor-neutral terms.

    Attributes:
        kind: What happened.
        text: Assistant text, a one-line tool-call summary, a shortened tool
            result, or an error message.
        subagent: True for content produced inside a subagent (filtered out of
            completion checks).
        tool_name: The tool's name for tool calls and results.
    """

    kind: AgentEventKind
    text: str = ""
    subagent: bool = False
    tool_name: str | None = None


class SessionUsage(Struct, frozen=True):
    """Token totals an agent reported for a whole session so far.

    Codex reports the thread's cumulative usage on every ``turn.completed``, so after
    a resume its numbers include every earlier iteration of that session.

    Attributes:
        session_id: The session the totals belong to.
        input_tokens: Input tokens used by the session so far.
        output_tokens: Output tokens used by the session so far.
    """

    session_id: str
    input_tokens: int
    output_tokens: int


class PermissionDenial(Struct, frozen=True):
    """A tool call the agent CLI refused to run because a permission rule denied it.

    Attributes:
        tool: The tool's name as the CLI calls it (``Bash``, ``run_shell_command``,
            ``bash``, ``command_execution``).
        command: The command line the call asked to run, else the tool's main
            argument (a path, a URL); None when the call named neither.
    """

    tool: str
    command: str | None = None


class IterationReport(Struct):
    """What an agent's output said about one iteration, gathered by a parser.

    Attributes:
        final_message: The root agent's final message (None when the agent gave
            none: a crash, a timeout, a truncated stream).
        last_root_text: The last root assistant text seen (for the excerpt when
            there is no final message).
        session_id: The agent's session id, if it reported one.
        result_seen: The agent's final result event arrived.
        is_error: The agent itself said the iteration failed.
        error_kind: Its classification, when ``is_error``.
        error_text: The agent's own error message.
        input_tokens: Input tokens this iteration (None if not reported).
        output_tokens: Output tokens this iteration (None if not reported).
        cost_usd: Cost of this iteration in USD (None if not reported).
        tool_calls: Tool calls made by the root agent or its subagents; None when
            the agent's output cannot show them (plain-text agents).
        model: The model the agent reported using.
        reset_at_ms: When a rate or usage limit resets (epoch ms), if given.
        lines: Output lines read; ``bad_lines`` of them were not understood.
        last_warning: The last error the agent reported that did not itself end
            the run (a retry notice, a reconnect message); it explains a run that
            then failed without a final error event.
        session_usage: Session-cumulative token totals, for agents that report
            those instead of per-iteration counts (Codex). ``input_tokens`` and
            ``output_tokens`` then hold the same totals until
            ``apply_usage_baseline`` turns them into this iteration's share.
        permission_denials: Tool calls the CLI refused under a permission rule, in
            the order it reported them.
    """

    final_message: str | None = None
    last_root_text: str | None = None
    session_id: str | None = None
    result_seen: bool = False
    is_error: bool = False
    error_kind: ErrorKind | None = None
    error_text: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    tool_calls: int | None = 0
    model: str | None = None
    reset_at_ms: int | None = None
    lines: int = 0
    bad_lines: int = 0
    last_warning: str | None = None
    session_usage: SessionUsage | None = None
    permission_denials: tuple[PermissionDenial, ...] = ()


class StreamParser(Protocol):
    """Consumes an agent's stdout line by line, keeping only what it needs."""

    def feed(self, line: str) -> list[AgentEvent]:
        """Parse one line (without its newline) and return the events it held."""
        ...

    def report(self) -> IterationReport:
        """What the lines so far said about the iteration."""
        ...


class InvocationRequest(Struct, frozen=True):
    """What the loop asks an adapter to launch.

    Attributes:
        prompt: The full prompt text.
        prompt_path: Where the prompt is saved for this iteration.
        cwd: The working directory (the user's repository).
        model: A model name, or None for the agent's default.
        resume_session_id: A session to resume (``--continue``), or None.
        extra_args: Arguments the user gave after ``--``.
    """

    prompt: str
    prompt_path: Path
    cwd: Path
    model: str | None = None
    resume_session_id: str | None = None
    extra_args: tuple[str, ...] = ()


class Invocation(Struct, frozen=True):
    """A process to start: argv (never a shell string), env changes, stdin bytes.

    ``stdin`` None means ``/dev/null``; bytes are written and stdin then closed.
    """

    argv: list[str]
    env_set: Mapping[str, str] = field(default_factory=dict)
    env_unset: tuple[str, ...] = ()
    stdin: bytes | None = None


class Classification(Struct, frozen=True):
    """How an iteration ended, from the agent's side: ``ok`` or ``agent_error``.

    Attributes:
        ok: The agent itself says the iteration succeeded.
        error_kind: Why it failed, when not ``ok``.
        message: The agent's own error text, when not ``ok``.
        reset_at_ms: When a rate or usage limit resets (epoch ms), if known; the
            adapters also record it on the ``IterationReport``.
    """

    ok: bool
    error_kind: ErrorKind | None = None
    message: str | None = None
    reset_at_ms: int | None = None


class AgentAdapter(Protocol):
    """One agent CLI. See ``adapter.CliAgent`` and ``CommandAdapter``."""

    @property
    def name(self) -> str:
        """The ``--agent`` name."""
        ...

    @property
    def verified_version(self) -> str:
        """The CLI version the adapter was verified against (``any`` for a program)."""
        ...

    @property
    def supports_sessions(self) -> bool:
        """Whether ``--continue`` can resume the agent's session."""
        ...

    @property
    def env_needed(self) -> tuple[str, ...]:
        """Environment variables the CLI reads (globs), kept whatever ``env_exclude``
        says."""
        ...

    def check_installed(self) -> None:
        """Raise ``AgentNotFoundError`` naming what to install, if missing."""
        ...

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """The process for one iteration."""
        ...

    def new_parser(self) -> StreamParser:
        """A parser for one iteration's stdout."""
        ...

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Decide from the agent's own signals whether the iteration succeeded."""
        ...

    def valid_session_id(self, text: str) -> bool:
        """Whether ``text`` has the shape of this CLI's session ids (see
        ``session_id_fits``); False for agents without sessions."""
        ...


def apply_usage_baseline(report: IterationReport, baseline: SessionUsage | None) -> IterationReport:
    """This iteration's token counts, for agents that report session totals.

    When ``report.session_usage`` is set (Codex) and ``baseline`` holds the totals
    recorded after the previous iteration of the *same* session, the returned
    report's ``input_tokens``/``output_tokens`` are the differences. Otherwise (a
    new session, no baseline, an agent that reports per-iteration counts, or totals
    that went down) the report is returned unchanged.

    Args:
        report: The parser's report for the iteration just ended.
        baseline: ``report.session_usage`` as it was after the previous iteration
            of the session being resumed, or None.

    Returns:
        A copy of ``report`` with per-iteration token counts, or ``report`` itself.
    """
    totals = report.session_usage
    if totals is None or baseline is None or baseline.session_id != totals.session_id:
        return report
    if totals.input_tokens < baseline.input_tokens or totals.output_tokens < baseline.output_tokens:
        return report
    return replace(
        report,
        input_tokens=totals.input_tokens - baseline.input_tokens,
        output_tokens=totals.output_tokens - baseline.output_tokens,
    )


def session_id_fits(text: object, shape: re.Pattern[str] | None) -> TypeGuard[str]:
    """Whether ``text`` may be stored and passed to the CLI as a session id.

    It must be a string of 1 to ``SESSION_ID_MAX_CHARS`` characters, must not begin
    with ``-`` (an option to the CLI's parser), and must match ``shape`` whole. A
    ``shape`` of None (an agent without sessions) accepts nothing.
    """
    return (
        shape is not None
        and isinstance(text, str)
        and 0 < len(text) <= SESSION_ID_MAX_CHARS
        and not text.startswith("-")
        and shape.fullmatch(text) is not None
    )


def local_now() -> datetime:
    """The wall clock as an aware ``datetime`` in the local zone (``WallClock``)."""
    return datetime.now().astimezone()


def argv_bytes(text: str) -> int:
    """Bytes ``text`` takes as one argv element, encoded as UTF-8."""
    return len(text.encode("utf-8", "surrogatepass"))


def argument_problem(prompt: str) -> str | None:
    """Why ``prompt`` cannot be passed as one argv element (over ``MAX_ARG_BYTES``),
    naming the OS limit and the way around it; None if it can."""
    size = argv_bytes(prompt)
    if size <= MAX_ARG_BYTES:
        return None
    return (
        f"the prompt is {size} bytes, over the {MAX_ARG_BYTES} bytes the OS allows one "
        "argument (Linux's MAX_ARG_STRLEN): pass it with --prompt-via stdin or "
        "--prompt-via file"
    )


def find_executable(program: str, install_hint: str) -> str:
    """Resolve ``program`` on PATH (or as a path).

    Raises:
        AgentNotFoundError: with ``install_hint`` as the fix.
    """
    if os.sep in program:
        if os.access(program, os.X_OK) and not os.path.isdir(program):
            return program
        raise AgentNotFoundError(f"{program} is not an executable file; {install_hint}")
    import shutil  # its archive support loads bz2 and lzma: only when asked

    found = shutil.which(program)
    if found is None:
        raise AgentNotFoundError(f"{program} not found on PATH; {install_hint}")
    return found


def shorten(text: str, limit: int = 200) -> str:
    """One line of at most ``limit`` characters, for summaries; well-known secrets are
    redacted before the cut, so none survives in part (``core.redact``)."""
    flat = " ".join(redact(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
