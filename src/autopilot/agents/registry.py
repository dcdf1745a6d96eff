"""Agent names → adapters."""

from __future__ import annotations

import importlib

from autopilot.agents.base import AgentAdapter
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

_ADAPTERS: dict[str, tuple[str, str]] = {
    "claude": ("claude", "ClaudeAdapter"),
    "codex": ("codex", "CodexAdapter"),
    "pi": ("pi", "PiAdapter"),
    "gemini": ("gemini", "GeminiAdapter"),
    "copilot": ("copilot", "CopilotAdapter"),
    "opencode": ("opencode", "OpencodeAdapter"),
    "aider": ("aider", "AiderAdapter"),
    "demo": ("demo", "DemoAdapter"),
}
"""Each agent CLI's adapter: (module in ``autopilot.agents``, class). Only the adapter
a run uses is imported, so a driver holds one adapter's code, not eight."""


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
    if name in _ADAPTERS:
        module, attribute = _ADAPTERS[name]
        adapter: type[AgentAdapter] = getattr(
            importlib.import_module(f"autopilot.agents.{module}"), attribute
        )
        return adapter()
    if name == "command":
        from autopilot.agents.command import CommandAdapter, PromptVia

        return CommandAdapter(list(command), PromptVia(prompt_via))
    raise UsageError(f"unknown agent {name!r}; choose one of {', '.join(AGENT_NAMES)}")
