"""Any program as an agent: ``autopilot run --agent command -- PROGRAM [ARGS…]``.

The prompt goes to the program on stdin (the default), as its last argument
(``--prompt-via arg``), or as the path of a file holding it (``--prompt-via file``;
an argument ``{prompt_file}`` is replaced by that path, else the path is appended).
Output is plain text; the final message is its last non-empty paragraph, its lines as
written (blank lines inside a fenced code block do not end one). Success is exit status
0. The program's version is whatever the user installed.
"""

from __future__ import annotations

import re
from collections import deque
from enum import StrEnum

from autopilot.agents.base import (
    AgentEvent,
    Classification,
    Invocation,
    InvocationRequest,
    IterationReport,
    argument_problem,
    find_executable,
    shorten,
)
from autopilot.core.vocabulary import AgentEventKind, ErrorKind
from autopilot.errors import AgentNotFoundError, UsageError

_TAIL_LINES = 400
_TAIL_CHARS = 64 * 1024
_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")


class PromptVia(StrEnum):
    """How a command agent receives the prompt."""

    STDIN = "stdin"
    ARG = "arg"
    FILE = "file"


class PlainTextParser:
    """Keeps the last 400 lines (at most 64 Ki characters) of plain-text output; the
    final paragraph is the answer. Fenced code blocks (CommonMark: closed by the same
    character, at least as many times) are followed over the whole output, so a blank
    line inside one does not start a paragraph. Memory and time per line are bounded
    whatever the program prints."""

    def __init__(self) -> None:
        # Each kept line, and whether it ends a paragraph (blank, outside a fence).
        self._tail: deque[tuple[str, bool]] = deque(maxlen=_TAIL_LINES)
        self._fence: str | None = None
        self._tail_chars = 0
        self._lines = 0
        self._cached: IterationReport | None = None

    def feed(self, line: str) -> list[AgentEvent]:
        """Record one output line; every non-empty line is root text."""
        self._lines += 1
        kept = line.rstrip("\r")[:_TAIL_CHARS]
        fence = _FENCE_RE.fullmatch(kept)
        ends_paragraph = self._fence is None and not kept.strip()
        if self._fence is None:
            if fence and not (fence[1][0] == "`" and "`" in fence[2]):
                self._fence = fence[1]
        elif fence and fence[1].startswith(self._fence) and not fence[2].strip():
            self._fence = None
        if len(self._tail) == self._tail.maxlen:
            self._tail_chars -= len(self._tail[0][0])
        self._tail.append((kept, ends_paragraph))
        self._tail_chars += len(kept)
        while self._tail_chars > _TAIL_CHARS and len(self._tail) > 1:
            self._tail_chars -= len(self._tail.popleft()[0])
        self._cached = None
        return [AgentEvent(AgentEventKind.TEXT, kept)] if kept.strip() else []

    def report(self) -> IterationReport:
        """The last non-empty paragraph is the final message; tool calls are unknown."""
        if self._cached is None:
            paragraphs: list[list[str]] = [[]]
            for kept, ends_paragraph in self._tail:
                if ends_paragraph:
                    paragraphs.append([])
                else:
                    paragraphs[-1].append(kept)
            # Lines as written: an indented code block keeps the indent that makes it
            # code, so completion matching never reads it as prose.
            texts = ("\n".join(lines).rstrip() for lines in reversed(paragraphs))
            final = next((text for text in texts if text.strip()), None)
            self._cached = IterationReport(
                final_message=final,
                last_root_text=final,
                result_seen=False,
                tool_calls=None,
                lines=self._lines,
            )
        return self._cached


class CommandAdapter:
    """Runs a user-given program each iteration.

    Args:
        argv: The program and its arguments (from after ``--``).
        prompt_via: How the prompt is passed.
    """

    name = "command"
    verified_version = "any"
    supports_sessions = False
    env_needed: tuple[str, ...] = ()
    """Any program: ``env_exclude`` decides what it gets."""

    def __init__(self, argv: list[str], prompt_via: PromptVia = PromptVia.STDIN) -> None:
        if not argv:
            raise UsageError(
                "--agent command needs a program: autopilot run --agent command -- PROGRAM"
            )
        self.argv = list(argv)
        self.prompt_via = prompt_via

    def check_installed(self) -> None:
        """Raises ``UsageError`` if the program is not found: the user named it."""
        try:
            find_executable(self.argv[0], "check the program after '--'")
        except AgentNotFoundError as error:
            raise UsageError(str(error)) from None

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """The program with the prompt on stdin, as an argument, or as a file."""
        argv = [find_executable(self.argv[0], "check the program after '--'"), *self.argv[1:]]
        argv += list(request.extra_args)
        if self.prompt_via is PromptVia.ARG:
            if (problem := self.prompt_problem(request.prompt)) is not None:
                raise UsageError(problem)
            return Invocation(argv=[*argv, request.prompt])
        if self.prompt_via is PromptVia.FILE:
            path = str(request.prompt_path)
            if "{prompt_file}" in argv:
                return Invocation(argv=[path if a == "{prompt_file}" else a for a in argv])
            return Invocation(argv=[*argv, path])
        return Invocation(argv=argv, stdin=request.prompt.encode("utf-8"))

    def prompt_problem(self, prompt: str) -> str | None:
        """Why ``prompt`` cannot be passed the way asked (``--prompt-via arg`` over
        the OS's limit on one argument), or None."""
        return argument_problem(prompt) if self.prompt_via is PromptVia.ARG else None

    def new_parser(self) -> PlainTextParser:
        """A parser for plain-text output."""
        return PlainTextParser()

    def valid_session_id(self, text: str) -> bool:
        """Always False: a plain program has no sessions."""
        return False

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Exit 0 is success; otherwise the last stderr line is the error."""
        if exit_code == 0:
            return Classification(True)
        lines = [line for line in stderr_tail.strip().splitlines() if line.strip()]
        message = shorten(lines[-1], 400) if lines else f"{self.argv[0]} exited {exit_code}"
        return Classification(False, ErrorKind.UNKNOWN, message)
