"""The built-in scripted agent of ``autopilot demo``."""

from __future__ import annotations

import sys

from autopilot.agents.adapter import CliFacts
from autopilot.agents.claude import ClaudeAdapter


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
