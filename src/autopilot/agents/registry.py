"""Agent names → adapters."""

from __future__ import annotations

import sys

from autopilot.agents.adapter import CliFacts
from autopilot.agents.aider import AiderAdapter
from autopilot.agents.base import AgentAdapter
from autopilot.agents.claude import ClaudeAdapter
from autopilot.agents.codex import CodexAdapter
from autopilot.agents.command import CommandAdapter, PromptVia
from autopilot.agents.copilot import CopilotAdapter
from autopilot.agents.gemini import GeminiAdapter
from autopilot.agents.opencode import OpencodeAdapter
from autopilot.agents.pi import PiAdapter
from autopilot.errors import UsageError

AGENT_NAMES = (
    "claude",
    "codex",
    "pi",
    "gemini",
    "copilot",
    "opencode",
    "aider",
    "command",
    "demo",
)
"""Agents ``--agent`` accepts."""

_CLI_ADAPTERS: dict[str, type[AgentAdapter]] = {
    "claude": ClaudeAdapter,
    "codex": CodexAdapter,
    "pi": PiAdapter,
    "gemini": GeminiAdapter,
    "copilot": CopilotAdapter,
    "opencode": OpencodeAdapter,
    "aider": AiderAdapter,
}


class DemoAdapter(ClaudeAdapter):
    """The built-in scripted agent of ``autopilot demo``: speaks Claude Code's
    stream-json, so the demo runs the real parser, loop and files."""

    facts = CliFacts("demo", "built-in", "it is part of autopilot")

    def __init__(self) -> None:
        super().__init__(sys.executable)

    def build_invocation(self, request):  # type: ignore[no-untyped-def]
        """``python -m autopilot.testkit.demo_agent``; prompt on stdin."""
        invocation = super().build_invocation(request)
        argv = [sys.executable, "-m", "autopilot.testkit.demo_agent"]
        return type(invocation)(argv=argv, env_set=invocation.env_set, stdin=invocation.stdin)


def make_adapter(
    name: str, *, command: tuple[str, ...] = (), prompt_via: str = "stdin"
) -> AgentAdapter:
    """The adapter for ``--agent NAME``.

    Args:
        name: One of ``AGENT_NAMES``.
        command: The program and arguments for ``command``.
        prompt_via: ``stdin``, ``arg`` or ``file`` (``command`` only).

    Raises:
        UsageError: an unknown agent name, or ``command`` without a program.
    """
    if name in _CLI_ADAPTERS:
        return _CLI_ADAPTERS[name]()
    if name == "command":
        return CommandAdapter(list(command), PromptVia(prompt_via))
    if name == "demo":
        return DemoAdapter()
    raise UsageError(f"unknown agent {name!r}; choose one of {', '.join(AGENT_NAMES)}")
