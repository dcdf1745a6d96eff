"""OpenAI Codex CLI (``@openai/codex``), headless with ``codex exec --json``.

Verified against Codex 0.171.0 (its real output is in ``tests/data/captured-streams/``;
the format is ``ThreadEvent`` in openai/codex ``codex-rs/exec/src/exec_events.rs``).
Invocation::

    codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check
               --disable unbounded_connection_retries [-m MODEL] -C CWD [extra args]
               [resume SESSION] -- PROMPT                      (stdin: /dev/null)

Codex adds piped stdin to the prompt, so stdin is ``/dev/null`` and the prompt is one
argv element after ``--`` (a prompt starting with ``-`` stays a prompt). A prompt
longer than one argv element may be (``MAX_ARG_BYTES``) is passed as ``-`` with the
prompt on stdin, which ``codex exec`` then reads as the whole prompt.
``unbounded_connection_retries`` is on by default and makes Codex wait for the
network forever; turning it off lets an unreachable server end the iteration.

Facts the parser relies on:

* ``thread.started.thread_id`` (a UUID) is the session id; a resumed run keeps it;
* ``item.completed`` with ``agent_message`` carries root assistant text; the last
  one is the final message (a Stop hook can make a turn end with several);
* ``command_execution``, ``file_change``, ``mcp_tool_call``, ``web_search`` and
  ``collab_tool_call`` (subagents: spawn/send/wait/close) items are tool calls;
  subagent threads have no lines of their own in this stream; a command that the
  approval policy refused completes with ``status: "declined"`` (a permission denial);
* an ``error`` *item* or top-level ``error`` event (``Reconnecting... 1/5 …``) is only
  a warning, and explains a run that then ends without a result; ``turn.failed``
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

from typing import TYPE_CHECKING, Any

from autopilot.agents import fields
from autopilot.agents.adapter import CliAgent, CliFacts
from autopilot.agents.base import Invocation, SessionUsage, shorten
from autopilot.agents.parser import JsonLinesParser, summarize_tool_input

if TYPE_CHECKING:
    from autopilot.agents.base import AgentEvent, InvocationRequest, WallClock

_TOOL_ITEMS = frozenset(
    {"command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call"}
)


class CodexStreamParser(JsonLinesParser):
    """Parses ``codex exec --json`` lines.

    Args:
        clock: The wall clock, for reset times such as ``try again at 8:53 AM``.
    """

    def __init__(self, clock: WallClock | None = None) -> None:
        super().__init__(clock)
        self._tools_seen: set[str] = set()
        self._turn_text: str | None = None

    def handle_thread_started(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The thread (session) id."""
        return self.attach_session(event.get("thread_id"))

    def handle_item_started(self, event: dict[str, Any]) -> list[AgentEvent]:
        """An item begins: a tool call is counted once, when first seen."""
        return self._item(fields.as_object(event.get("item")), completed=False)

    handle_item_updated = handle_item_started

    def handle_item_completed(self, event: dict[str, Any]) -> list[AgentEvent]:
        """An item ends: assistant text, or a tool call's result."""
        return self._item(fields.as_object(event.get("item")), completed=True)

    def handle_turn_failed(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The turn failed: the agent's own words are the error."""
        self._report.result_seen = True
        message = fields.text(fields.as_object(event.get("error")).get("message"))
        return self.fail(message or "codex turn failed")

    def handle_error(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A non-fatal error (``Reconnecting... 1/5``): a warning."""
        message = fields.text(event.get("message"))
        return [self.warn(message)] if message else []

    def _item(self, item: dict[str, Any], *, completed: bool) -> list[AgentEvent]:
        item_type = item.get("type")
        if item_type == "agent_message":
            text = item.get("text")
            if completed and isinstance(text, str):
                self._turn_text = text
                return [self.text(text)]
            return []
        if not isinstance(item_type, str) or item_type not in _TOOL_ITEMS:
            return []
        events: list[AgentEvent] = []
        item_id = str(item.get("id") or id(item))
        name = str(item.get("tool") or item.get("server") or item_type)
        if item_id not in self._tools_seen:
            self._tools_seen.add(item_id)
            events.append(self.tool_call(name, None, summary=_summary(item)))
        if completed:
            if item.get("status") == "declined":
                self.deny(name, item)
            output = item.get("aggregated_output")
            text = output if isinstance(output, str) else str(item.get("status") or "")
            events.append(self.tool_result(text, name=name))
        return events

    def handle_turn_completed(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The turn's end: the last agent message is the final message."""
        report = self._report
        usage = event.get("usage")
        if isinstance(usage, dict):
            # The thread's totals, not this turn's: see ``apply_usage_baseline``.
            report.input_tokens = fields.count(usage.get("input_tokens"))
            report.output_tokens = fields.count(usage.get("output_tokens"))
            if report.session_id:
                report.session_usage = SessionUsage(
                    report.session_id, report.input_tokens, report.output_tokens
                )
        return self.finish(self._turn_text)


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
    """Drives ``codex exec --json``; see the module docstring for the invocation."""

    facts = CliFacts("codex", "0.171.0", "npm install -g @openai/codex")
    parser_class = CodexStreamParser
    env_needed = ("OPENAI_*", "CODEX_*", "AZURE_OPENAI_*", "RUST_LOG")
    fixed_args = (
        "exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check "
        "--disable unbounded_connection_retries"
    )
    cwd_flag = "-C"
    resume_flag = "resume"
    resume_is_subcommand = True

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``codex exec --json … [resume ID] -- PROMPT`` with stdin ``/dev/null``.

        A prompt over ``MAX_ARG_BYTES`` goes on stdin instead (argument ``-``).
        """
        argv = self.argv(request)
        if not self.argv_can_carry(request.prompt):
            return Invocation(argv=[*argv, "-"], stdin=request.prompt.encode("utf-8"))
        return Invocation(argv=[*argv, "--", request.prompt])
