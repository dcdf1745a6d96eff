"""The live tail of an iteration's agent output, rendered for people.

Each iteration's raw agent stdout is ``<run>/iter-NNNN/stdout.log`` (a retried
iteration gets ``iter-NNNN.2``, …). Lines are parsed with the run's own adapter
parser (``make_adapter(state['agent']).new_parser()``; Claude Code stream-json for
``claude`` and ``demo``, plain text for ``command``), so what is shown is what the
driver understood: assistant text, tool calls with their arguments summarised, tool
results shortened. A line the parser cannot read is shown as it is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from autopilot.agents.base import AgentEvent, StreamParser, shorten
from autopilot.agents.guard import guarded
from autopilot.core.vocabulary import AgentEventKind
from autopilot.errors import AutopilotError
from autopilot.store.rundir import ATTEMPT_PREFIX, AttemptDir

INITIAL_OUTPUT_BYTES = 256 * 1024
"""On attaching to an iteration, only its last 256 KiB of output are read."""

RESULT_CHARS = 160
RAW_CHARS = 400

_FOLDER_RE = re.compile(rf"^{ATTEMPT_PREFIX}(\d{{4,}})(?:\.(\d+))?$")


class LineKind(StrEnum):
    """How a rendered output line is shown."""

    TEXT = "text"
    SUBAGENT = "subagent"
    TOOL = "tool"
    RESULT = "result"
    ERROR = "error"
    NOTICE = "notice"
    RAW = "raw"


@dataclass(frozen=True)
class OutputLine:
    """One line of rendered agent output.

    Attributes:
        kind: How to show it.
        text: The line's text (assistant text may hold several lines).
        tool: The tool's name, for ``TOOL`` lines.
    """

    kind: LineKind
    text: str
    tool: str | None = None


def render_agent_event(event: AgentEvent) -> OutputLine | None:
    """One normalised agent event as a line for people, or None to leave it out."""
    kind = event.kind
    if kind is AgentEventKind.TEXT:
        if not event.text.strip():
            return None
        return OutputLine(
            LineKind.SUBAGENT if event.subagent else LineKind.TEXT, event.text.strip()
        )
    if kind is AgentEventKind.TOOL_CALL:
        return OutputLine(LineKind.TOOL, event.text, event.tool_name or "tool")
    if kind is AgentEventKind.TOOL_RESULT:
        return OutputLine(LineKind.RESULT, shorten(event.text, RESULT_CHARS) or "(no output)")
    if kind is AgentEventKind.ERROR:
        return OutputLine(LineKind.ERROR, event.text or "agent error")
    if kind in (AgentEventKind.RATE_LIMIT, AgentEventKind.RETRY):
        return OutputLine(LineKind.NOTICE, event.text)
    if kind is AgentEventKind.RESULT:
        return OutputLine(LineKind.NOTICE, "final result received")
    return None


def _new_parser(agent: str | None, command: tuple[str, ...]) -> StreamParser | None:
    from autopilot.agents.registry import make_adapter

    if not agent:
        return None
    try:
        adapter = make_adapter(agent, command=command or ("agent",))
    except AutopilotError:
        return None
    # A line the parser raises on is shown raw (the driver logs the failure).
    return guarded(adapter, lambda note: None).new_parser()


class OutputRenderer:
    """Turns raw stdout lines of one iteration into ``OutputLine`` values.

    Args:
        agent: The run's agent name (``state.json`` ``agent``); an unknown agent
            means raw lines.
        command: The run's command (``command`` agents).
    """

    def __init__(self, agent: str | None, command: tuple[str, ...] = ()) -> None:
        self._parser = _new_parser(agent, command)

    def feed(self, line: str) -> list[OutputLine]:
        """Render one raw line (without its newline)."""
        if not line.strip():
            return []
        if self._parser is None:
            return [OutputLine(LineKind.RAW, shorten(line, RAW_CHARS))]
        before = self._parser.report().bad_lines
        events = self._parser.feed(line)
        if self._parser.report().bad_lines > before and not events:
            return [OutputLine(LineKind.RAW, shorten(line, RAW_CHARS))]
        rendered = (render_agent_event(event) for event in events)
        return [item for item in rendered if item is not None]


def iteration_folder(run_dir: Path, iteration: int) -> Path | None:
    """The folder of the latest attempt at ``iteration`` (``iter-NNNN[.K]``), if any."""
    best: tuple[int, Path] | None = None
    try:
        entries = list(os.scandir(run_dir))
    except OSError:
        return None
    for entry in entries:
        match = _FOLDER_RE.match(entry.name)
        if match is None or int(match.group(1)) != iteration:
            continue
        attempt = int(match.group(2) or 1)
        if best is None or attempt > best[0]:
            best = (attempt, Path(entry.path))
    return best[1] if best else None


class OutputFollower:
    """Follows the agent output of the run's current iteration.

    Args:
        run_dir: The run's folder.
        state: The run's ``state.json`` (for ``agent`` and ``command``).
    """

    def __init__(self, run_dir: Path, state: Mapping[str, Any] | None) -> None:
        self.run_dir = run_dir
        state = state or {}
        agent = state.get("agent")
        self._agent = agent if isinstance(agent, str) else None
        self._command = tuple(str(part) for part in state.get("command") or ())
        self.iteration: int | None = None
        self.folder: Path | None = None
        self._offset = 0
        self._renderer = OutputRenderer(self._agent, self._command)

    @property
    def path(self) -> Path | None:
        """The stdout file followed now."""
        return AttemptDir(self.folder).stdout if self.folder is not None else None

    def attach(self, iteration: int) -> bool:
        """Follow ``iteration``'s latest attempt; True if that changed the folder."""
        folder = iteration_folder(self.run_dir, iteration) if iteration > 0 else None
        if iteration == self.iteration and folder == self.folder:
            return False
        self.iteration = iteration
        self.folder = folder
        self._offset = -1  # not positioned yet: start near the end
        self._renderer = OutputRenderer(self._agent, self._command)
        return True

    def read_new(self) -> list[OutputLine]:
        """Rendered lines of the output written since the last read."""
        path = self.path
        if path is None:
            if self.iteration:
                self.attach(self.iteration)
                path = self.path
            if path is None:
                return []
        try:
            with path.open("rb") as stream:
                size = os.fstat(stream.fileno()).st_size
                skip_partial = False
                if self._offset < 0 or size < self._offset:
                    start = max(0, size - INITIAL_OUTPUT_BYTES)
                    skip_partial = start > 0
                    self._offset = start
                if size == self._offset:
                    return []
                stream.seek(self._offset)
                data = stream.read(size - self._offset)
        except OSError:
            return []
        cut = data.rfind(b"\n")
        if cut < 0:
            return []
        self._offset += cut + 1
        lines = data[:cut].split(b"\n")
        if skip_partial:
            lines = lines[1:]
        rendered: list[OutputLine] = []
        for raw in lines:
            rendered.extend(self._renderer.feed(raw.decode("utf-8", "replace").rstrip("\r")))
        return rendered
