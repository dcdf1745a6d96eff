"""OpenAI Codex CLI (``@openai/codex``), headless with ``codex exec --json``.

Verified against Codex 0.171.0 (``reference/agent-clis.md`` §2, ``offline-e2e.md`` and
the real streams ``codex*.jsonl`` in ``reference/streams/``). Invocation::

    codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check
               --disable unbounded_connection_retries [-m MODEL] -C CWD [extra args]
               [resume SESSION] -- PROMPT                      (stdin: /dev/null)

Codex adds piped stdin to the prompt, so stdin is ``/dev/null`` and the prompt is one
argv element after ``--`` (a prompt starting with ``-`` stays a prompt). A prompt
longer than one argv element may be (``MAX_ARG_BYTES``) is passed as ``-`` with the
prompt on stdin, which ``codex exec`` then reads as the whole prompt.
``unbounded_connection_retries`` is on by default and makes Codex wait for the
network forever; turning it off lets an unreachable server end the iteration.

Facts the parser relies on (``ThreadEvent`` in ``codex-rs/exec/src/exec_events.rs``):

* ``thread.started.thread_id`` is the session id; a resumed run keeps it;
* ``item.completed`` with ``agent_message`` carries root assistant text; the last
  one is the final message (a Stop hook can make a turn end with several);
* ``command_execution``, ``file_change``, ``mcp_tool_call``, ``web_search`` and
  ``collab_tool_call`` (subagents: spawn/send/wait/close) items are tool calls;
  subagent threads have no lines of their own in this stream;
* an ``error`` *item* or top-level ``error`` event is only a warning; ``turn.failed``
  is fatal, its ``error.message`` is the agent's own words (``Quota exceeded.``,
  ``unexpected status 401 …``, ``You've hit your usage limit … try again at 8:53 AM``);
* ``turn.completed.usage`` holds token counts for the whole *thread*: after a resume
  they include earlier iterations (``codex-stream-resume.jsonl``: 400/80 after
  200/40). The report's ``session_usage`` carries them for
  ``base.apply_usage_baseline``. There is no cost field;
* exit status is 0 on success and 1 on failure; lines that are not JSON (a stray
  ``Reading additional input from stdin...``) are skipped.
"""

from __future__ import annotations

from typing import Any

from autopilot.agents import failures, limits
from autopilot.agents.base import (
    MAX_ARG_BYTES,
    AgentEvent,
    AgentEventKind,
    Classification,
    CliAgent,
    Invocation,
    InvocationRequest,
    IterationReport,
    SessionUsage,
    WallClock,
    argv_bytes,
    find_executable,
    load_json_line,
    local_now,
    shorten,
    summarize_tool_input,
)

_TOOL_ITEMS = frozenset(
    {"command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call"}
)


class CodexStreamParser:
    """Parses ``codex exec --json`` lines.

    Args:
        clock: The wall clock, for reset times such as ``try again at 8:53 AM``.
    """

    def __init__(self, clock: WallClock | None = None) -> None:
        self._report = IterationReport()
        self._clock = clock or local_now
        self._tools_seen: set[str] = set()
        self._turn_text: str | None = None

    def report(self) -> IterationReport:
        """What the stream so far said; see ``IterationReport``."""
        return self._report

    def feed(self, line: str) -> list[AgentEvent]:
        """Parse one stdout line; unknown or malformed lines give no events."""
        event = load_json_line(self._report, line)
        if event is None:
            return []
        kind = event.get("type")
        if kind == "thread.started":
            thread = event.get("thread_id")
            if isinstance(thread, str) and thread:
                self._report.session_id = thread
                return [AgentEvent(AgentEventKind.SESSION, thread)]
            return []
        if kind in ("item.started", "item.updated", "item.completed"):
            item = event.get("item")
            if isinstance(item, dict):
                return self._item(item, completed=kind == "item.completed")
            return []
        if kind == "turn.completed":
            return self._turn_completed(event)
        if kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            return self._fail(message if isinstance(message, str) else "codex turn failed")
        if kind == "error":
            message = event.get("message")
            if isinstance(message, str) and message:
                self._report.last_warning = shorten(message, 1000)
                return [AgentEvent(AgentEventKind.RETRY, message)]
        return []

    def _item(self, item: dict[str, Any], *, completed: bool) -> list[AgentEvent]:
        item_type = item.get("type")
        if item_type == "agent_message":
            text = item.get("text")
            if completed and isinstance(text, str):
                self._report.last_root_text = text
                self._turn_text = text
                return [AgentEvent(AgentEventKind.TEXT, text)]
            return []
        if item_type not in _TOOL_ITEMS:
            return []
        events: list[AgentEvent] = []
        item_id = str(item.get("id") or id(item))
        name = str(item.get("tool") or item.get("server") or item_type)
        if item_id not in self._tools_seen:
            self._tools_seen.add(item_id)
            self._report.tool_calls = (self._report.tool_calls or 0) + 1
            events.append(AgentEvent(AgentEventKind.TOOL_CALL, _summary(item), tool_name=name))
        if completed:
            output = item.get("aggregated_output")
            text = output if isinstance(output, str) else str(item.get("status") or "")
            result = AgentEvent(AgentEventKind.TOOL_RESULT, shorten(text, 300), tool_name=name)
            events.append(result)
        return events

    def _turn_completed(self, event: dict[str, Any]) -> list[AgentEvent]:
        report = self._report
        report.result_seen = True
        report.final_message = self._turn_text
        usage = event.get("usage")
        if isinstance(usage, dict):
            report.input_tokens = _count(usage.get("input_tokens"))
            report.output_tokens = _count(usage.get("output_tokens"))
            if report.session_id:
                report.session_usage = SessionUsage(
                    report.session_id, report.input_tokens, report.output_tokens
                )
        events = [AgentEvent(AgentEventKind.RESULT, report.final_message or "")]
        if isinstance(usage, dict):
            events.append(AgentEvent(AgentEventKind.USAGE, ""))
        return events

    def _fail(self, message: str) -> list[AgentEvent]:
        report = self._report
        report.result_seen = True
        report.is_error = True
        report.final_message = None
        report.error_text = message
        report.error_kind = failures.classify_error_text(message)
        if report.error_kind in failures.LIMIT_KINDS:
            report.reset_at_ms = limits.parse_reset_time(message, self._clock())
            return [AgentEvent(AgentEventKind.RATE_LIMIT, message)]
        return [AgentEvent(AgentEventKind.ERROR, message)]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _summary(item: dict[str, Any]) -> str:
    if isinstance(item.get("command"), str):
        return shorten(item["command"], 160)
    changes = item.get("changes")
    if isinstance(changes, list):
        paths = [c.get("path", "") for c in changes if isinstance(c, dict)]
        return shorten(" ".join(str(p) for p in paths), 160)
    for key in ("query", "prompt", "tool"):
        if isinstance(item.get(key), str):
            return shorten(item[key], 160)
    return summarize_tool_input(item.get("arguments") or {})


class CodexAdapter(CliAgent):
    """Drives ``codex exec --json``; see the module docstring for the invocation.

    Args:
        executable: The ``codex`` program (name on PATH or a path); the
            ``AUTOPILOT_CODEX_BIN`` variable overrides the default.
        clock: The wall clock, for reset times given as a clock time.
    """

    name = "codex"
    verified_version = "0.171.0"
    supports_sessions = True
    install_hint = "install Codex: npm install -g @openai/codex"
    default_executable = "codex"
    env_needed: tuple[str, ...] = ("OPENAI_*", "CODEX_*", "AZURE_OPENAI_*", "RUST_LOG")
    """Environment variables this CLI reads (globs); ``env_exclude`` never drops them."""

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``codex exec --json … [resume ID] -- PROMPT`` with stdin ``/dev/null``.

        A prompt over ``MAX_ARG_BYTES`` goes on stdin instead (argument ``-``).
        """
        argv = [
            find_executable(self.executable, self.install_hint),
            "exec",
            "--json",
            "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check",
            "--disable",
            "unbounded_connection_retries",
        ]
        if request.model:
            argv += ["-m", request.model]
        argv += ["-C", str(request.cwd), *request.extra_args]
        if request.resume_session_id:
            argv += ["resume", request.resume_session_id]
        if argv_bytes(request.prompt) > MAX_ARG_BYTES:
            return Invocation(argv=[*argv, "-"], stdin=request.prompt.encode("utf-8"))
        return Invocation(argv=[*argv, "--", request.prompt])

    def new_parser(self) -> CodexStreamParser:
        """A parser for one iteration's ``--json`` output."""
        return CodexStreamParser(self.clock)

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Success is exit 0 and ``turn.completed``; ``turn.failed`` is the agent's error.

        A run that exits without either (killed while ``Reconnecting... waiting for
        network``) is classified from its last ``error`` event, then stderr. The
        verdict is also recorded on ``report``.
        """
        return failures.conclude(report, exit_code, stderr_tail, program="codex", now=self.clock())
