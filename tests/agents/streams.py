"""The real captured CLI outputs, read at test time.

``tests/data/captured-streams/`` holds the real programs' output from runs against a
local scripted model server, kept with the tests so a clone tests on its own. ``run``
feeds one capture through an adapter's parser line by line, as the driver does, then
classifies it with the exit status the CLI gives in that case and the capture's
stderr, if saved; ``run_lines`` does the same for lines written in a test.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from autopilot.agents.base import (
    AgentAdapter,
    AgentEvent,
    Classification,
    IterationReport,
)
from autopilot.core.vocabulary import AgentEventKind, ErrorKind

STREAMS = Path(__file__).resolve().parents[1] / "data" / "captured-streams"
"""The captured streams, kept with the tests."""

CAPTURED_AT = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
"""A fixed "now" on the day the streams were captured (their timestamps)."""


def fixed_clock() -> datetime:
    """A ``WallClock`` that always says ``CAPTURED_AT``."""
    return CAPTURED_AT


def captures(*prefixes: str) -> list[str]:
    """Names (relative to ``STREAMS``) of every stdout capture starting with a prefix.

    stderr captures (``.err``) and files that are not a CLI's stdout are left out by
    the caller; this lists what exists so a test can prove it covers all of it.
    """
    assert STREAMS.is_dir(), f"captured streams not found at {STREAMS}"
    names = []
    for path in sorted(STREAMS.rglob("*")):
        if path.is_file() and path.suffix != ".err" and path.name.startswith(prefixes):
            names.append(path.relative_to(STREAMS).as_posix())
    return names


@dataclass
class Run:
    """One capture after parsing and classification."""

    report: IterationReport
    verdict: Classification
    events: list[AgentEvent]

    def texts(self, *, subagent: bool) -> list[str]:
        """Assistant texts the parser emitted, from the root agent or from subagents."""
        return [
            e.text for e in self.events if e.kind is AgentEventKind.TEXT and e.subagent is subagent
        ]


def run(adapter: AgentAdapter, name: str, exit_code: int = 0) -> Run:
    """Parse the capture ``name`` with ``adapter`` and classify it."""
    path = STREAMS / name
    with path.open(encoding="utf-8", newline="") as handle:
        lines = [line.rstrip("\n") for line in handle]
    stderr_path = path.with_suffix(".err")
    stderr = stderr_path.read_text(encoding="utf-8") if stderr_path.exists() else ""
    return run_lines(adapter, lines, exit_code, stderr)


def run_lines(
    adapter: AgentAdapter,
    lines: Iterable[str | dict[str, Any]],
    exit_code: int = 0,
    stderr: str = "",
) -> Run:
    """Feed ``lines`` (text, or objects written as compact JSON lines) to a parser of
    ``adapter``, as the driver does, then classify the run."""
    parser = adapter.new_parser()
    events: list[AgentEvent] = []
    for line in lines:
        text = line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)
        events.extend(parser.feed(text))
    report = parser.report()
    verdict = adapter.classify(report, exit_code, stderr)
    return Run(report, verdict, events)


@dataclass(frozen=True)
class Want:
    """The normalised values a capture must produce.

    Attributes:
        exit_code: The exit status the CLI gives in that case.
        final: The root agent's final message (None after a failure).
        session: The session id.
        tokens: (input, output) tokens; None where the CLI reports none.
        tools: Tool calls (root and subagents); None where the output cannot show them.
        kind: The error kind; None for a success.
        cost: Cost in USD; None where the CLI reports none.
        reset_at_ms: The reset time of a rate or usage limit.
        error: The agent's own error words (exact), for failures.
    """

    exit_code: int
    final: str | None
    session: str | None
    tokens: tuple[int | None, int | None]
    tools: int | None
    kind: ErrorKind | None = None
    cost: float | None = None
    reset_at_ms: int | None = None
    error: str | None = None


def check(result: Run, want: Want) -> None:
    """Assert every normalised value of ``result`` against ``want``."""
    report, verdict = result.report, result.verdict
    assert verdict.ok is (want.kind is None), verdict
    assert verdict.error_kind == want.kind
    assert report.final_message == want.final
    assert report.session_id == want.session
    assert (report.input_tokens, report.output_tokens) == want.tokens
    assert report.tool_calls == want.tools
    assert report.cost_usd == (pytest.approx(want.cost) if want.cost is not None else None)
    assert verdict.reset_at_ms == want.reset_at_ms
    assert report.reset_at_ms == want.reset_at_ms
    if want.kind is not None:
        assert report.error_kind == want.kind
        assert verdict.message == want.error
        assert report.error_text == want.error
