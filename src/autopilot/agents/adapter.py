"""``CliAgent``: what every agent CLI adapter shares.

An adapter module for a CLI declares what names it (``CliFacts``), its parser class
and how its argv is formed (``fixed_args``, ``cwd_flag``, ``resume_flag``); the
executable lookup, the argv, the parser, session-id validation and the usual verdict
(``failures.conclude``) come from here. A CLI that takes its prompt other than on
stdin overrides ``build_invocation``; one whose exit status or output needs more
overrides ``classify``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from autopilot.agents import failures
from autopilot.agents.base import (
    MAX_ARG_BYTES,
    Invocation,
    argv_bytes,
    find_executable,
    local_now,
    session_id_fits,
)
from autopilot.agents.parser import AgentParser, JsonLinesParser

if TYPE_CHECKING:
    from autopilot.agents.base import Classification, InvocationRequest, IterationReport, WallClock


@dataclass(frozen=True)
class CliFacts:
    """What names an agent CLI.

    Attributes:
        name: The ``--agent`` name, also the program's name on PATH.
        verified_version: The CLI version the adapter was verified against.
        install: The command that installs the CLI.
    """

    name: str
    verified_version: str
    install: str


class CliAgent:
    """One agent CLI; see the module docstring.

    Args:
        executable: The program (a name on PATH or a path); else the variable
            ``AUTOPILOT_<NAME>_BIN`` (``AUTOPILOT_CODEX_BIN``), else ``name`` on PATH.
        clock: The wall clock, for reset times.
    """

    facts: ClassVar[CliFacts] = CliFacts("agent", "", "")
    supports_sessions: ClassVar[bool] = True
    env_needed: ClassVar[tuple[str, ...]] = ()
    """Environment variables this CLI reads (globs); ``env_exclude`` never drops them."""
    parser_class: ClassVar[type[AgentParser]] = JsonLinesParser
    """The parser of one iteration's stdout; its ``session_id_shape`` is the CLI's."""
    fixed_args: ClassVar[str] = ""
    """The CLI's headless, allow-all-tools options as typed (words split on spaces),
    right after the program."""
    cwd_flag: ClassVar[str | None] = None
    """The option naming the working directory, for CLIs that have one."""
    resume_flag: ClassVar[str] = "--resume"
    """What resumes a session: an option (``--resume=`` is joined to the id) or, with
    ``resume_is_subcommand``, a subcommand that follows every option."""
    resume_is_subcommand: ClassVar[bool] = False

    def __init__(self, executable: str | None = None, *, clock: WallClock | None = None) -> None:
        env_name = f"AUTOPILOT_{self.name.upper()}_BIN"
        self.executable = executable or os.environ.get(env_name) or self.name
        self.clock = clock or local_now

    @property
    def name(self) -> str:
        """The ``--agent`` name (``CliFacts.name``)."""
        return self.facts.name

    @property
    def verified_version(self) -> str:
        """The CLI version the adapter was verified against."""
        return self.facts.verified_version

    @property
    def install_hint(self) -> str:
        """What to do when the CLI is missing: ``install NAME: COMMAND``."""
        return f"install {self.facts.name}: {self.facts.install}"

    def check_installed(self) -> None:
        """Raises ``AgentNotFoundError`` naming what to install, if missing."""
        find_executable(self.executable, self.install_hint)

    def program(self) -> str:
        """The resolved executable, argv[0] of every invocation.

        Raises:
            AgentNotFoundError: it cannot be found.
        """
        return find_executable(self.executable, self.install_hint)

    def argv(self, request: InvocationRequest) -> list[str]:
        """The invocation's argv up to the prompt.

        ``PROGRAM FIXED_ARGS [--model M] [CWD_FLAG DIR] [RESUME] EXTRA_ARGS``, with a
        resume subcommand after the extra arguments instead.

        Raises:
            AgentNotFoundError: the program cannot be found.
        """
        argv = [self.program(), *self.fixed_args.split()]
        if request.model:
            argv += ["--model", request.model]
        if self.cwd_flag is not None:
            argv += [self.cwd_flag, str(request.cwd)]
        session = self.resume_id(request)
        flag = self.resume_flag
        if session is None:
            resume = []
        else:
            resume = [flag + session] if flag.endswith("=") else [flag, session]
        if self.resume_is_subcommand:
            return [*argv, *request.extra_args, *resume]
        return [*argv, *resume, *request.extra_args]

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``argv`` with the prompt on stdin, then stdin closed (no argv limit)."""
        return Invocation(argv=self.argv(request), stdin=request.prompt.encode("utf-8"))

    @staticmethod
    def argv_can_carry(prompt: str, prefix: str = "") -> bool:
        """Whether ``prefix + prompt`` fits in one argv element (``MAX_ARG_BYTES``)."""
        return argv_bytes(prefix + prompt) <= MAX_ARG_BYTES

    def new_parser(self) -> AgentParser:
        """A parser for one iteration's stdout."""
        return self.parser_class(self.clock)

    def valid_session_id(self, text: str) -> bool:
        """Whether ``text`` has the shape of this CLI's session ids."""
        return session_id_fits(text, self.parser_class.session_id_shape)

    def resume_id(self, request: InvocationRequest) -> str | None:
        """The session to resume: the requested one if it is a session id of this
        CLI, else None (an id of another shape never reaches argv)."""
        session = request.resume_session_id
        return session if session and self.valid_session_id(session) else None

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Success is exit 0, the CLI's final result event and no error in it.

        Otherwise the kind comes from the CLI's structured error, else from its last
        warning or stderr (``failures.conclude``). The verdict is also recorded on
        ``report``.
        """
        return failures.conclude(
            report, exit_code, stderr_tail, program=self.name, now=self.clock()
        )
