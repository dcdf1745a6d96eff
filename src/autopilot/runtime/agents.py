"""The agent adapter a run was armed with."""

from __future__ import annotations

from autopilot.agents.base import AgentAdapter
from autopilot.agents.registry import make_adapter
from autopilot.store.run_state import RunState


def adapter_for_state(state: RunState) -> AgentAdapter:
    """The adapter of ``state``'s agent, program and prompt channel.

    Raises:
        UsageError: the agent is unknown, or ``command`` has no program.
    """
    command = state.command
    if state.config.agent == "command" and not command:
        command = ("true",)  # only its saved output is read (crash recovery)
    return make_adapter(state.config.agent, command=command, prompt_via=state.config.prompt_via)
