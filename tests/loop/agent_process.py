"""One agent process run as the driver runs it (``loop.process.run_agent_process``),
for the process and descendant tests: its output read as Claude Code's stream."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from autopilot.agents.base import IterationReport
from autopilot.agents.claude import ClaudeStreamParser
from autopilot.loop.cgroup import AgentCgroup
from autopilot.loop.process import ProcessLimits, ProcessResult, run_agent_process

FAKE_AGENT = [sys.executable, "-m", "autopilot.testkit.fake_agent"]
"""The test kit's fake Claude Code (``fake_agent`` fixture's scripts)."""


def run_agent(
    tmp_path: Path,
    argv: list[str],
    env: dict[str, str],
    *,
    limits: ProcessLimits,
    stdin: bytes | None = b"hi",
    cgroup: AgentCgroup | None = None,
) -> tuple[ProcessResult, IterationReport, list[str], int | None]:
    """Run ``argv`` in ``tmp_path`` with ``env`` added to this environment (and
    iteration 1), its output logged to ``tmp_path``; how it ended, the report of its
    stream, its lines and its pid (None: it never started)."""
    parser = ClaudeStreamParser()
    lines: list[str] = []

    def on_line(line: str) -> None:
        lines.append(line)
        parser.feed(line)

    pids: list[int] = []
    result = run_agent_process(
        argv,
        cwd=tmp_path,
        env=dict(os.environ, **env, AUTOPILOT_ITERATION="1"),
        stdin_data=stdin,
        stdout_path=tmp_path / "stdout.log",
        stderr_path=tmp_path / "stderr.log",
        on_line=on_line,
        result_seen=lambda: parser.report().result_seen,
        should_kill=lambda: False,
        limits=limits,
        on_start=pids.append,
        cgroup=cgroup,
    )
    return result, parser.report(), lines, pids[0] if pids else None
