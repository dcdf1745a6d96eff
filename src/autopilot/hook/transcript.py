"""What a session's transcript says about the turn that just stopped.

Formats (docs/hooks.md, verified on the pinned versions):

- Claude Code 2.1.197, ``~/.claude/projects/<cwd with dashes>/<session>.jsonl``: one
  entry per line; ``type`` ``assistant`` entries carry ``message.content`` blocks
  (``text``, ``tool_use``) and ``message.usage``, keyed by ``uuid``; ``type`` ``user``
  entries are prompts (a string or ``text`` blocks, the hook's own
  ``Stop hook feedback:`` line included) or ``tool_result`` blocks; a user interrupt is
  a prompt starting ``[Request interrupted by user``; a compaction is a ``system``
  entry with ``subtype`` ``compact_boundary`` or a user entry with
  ``isCompactSummary``. Sidechain (subagent) entries are skipped. Claude Code
  versions before 2.1.197 also wrote a ``costUSD`` on assistant entries (read by
  ccusage, https://ccusage.com/guide/cost-modes); 2.1.197 writes no cost.
- Codex 0.171.0, ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-….jsonl``: ``response_item``
  lines whose ``payload`` is a ``message`` (``role`` ``assistant`` with
  ``output_text`` blocks, or ``user`` with ``input_text``; the hook's reason comes
  back as ``<hook_prompt …>``), or a ``function_call`` / ``custom_tool_call``; an
  ``event_msg`` ``token_count`` carries the session's ``total_token_usage``; an
  ``event_msg`` ``turn_aborted`` is an interrupt and a ``compacted`` line (or
  ``event_msg`` ``context_compacted``) a compaction.

Reading is bounded (the last ``MAX_TRANSCRIPT_BYTES``); a line that is not JSON is
skipped. ``summarize`` is pure; ``read_turn`` is its file shell.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeGuard

from autopilot.core.vocabulary import HookAgent

MAX_TRANSCRIPT_BYTES = 16 << 20


class TurnEnd(StrEnum):
    """Something after the newest assistant entry that means the session must stop."""

    COMPACTION = "compaction"
    INTERRUPT = "interrupt"


@dataclass(frozen=True)
class TokenTotals:
    """The session's token totals so far (both CLIs report per-call usage)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class TurnView:
    """The transcript as the hook needs it.

    Attributes:
        newest_assistant_key: The key (Claude ``uuid``, Codex item id) of the newest
            assistant entry, text or tool call; None when there is none.
        turn_text: The text of the assistant entries since the last prompt, joined
            by blank lines, oldest first; None when they hold no text (tool calls
            only, or no entry yet).
        ended_by: A compaction or an interrupt after the newest assistant entry.
        tokens: The session's token totals, or None when the transcript has none.
        cost_usd: The session's cost so far in USD, where the transcript records one
            (a ``costUSD`` on Claude Code's assistant entries, written by versions
            before 2.1.197); None when no entry has one (Claude Code 2.1.197 and
            Codex 0.171.0 record none).
    """

    newest_assistant_key: str | None = None
    turn_text: str | None = None
    ended_by: TurnEnd | None = None
    tokens: TokenTotals | None = None
    cost_usd: float | None = None


_INTERRUPT_PREFIX = "[Request interrupted by user"


def _texts(content: object, kinds: tuple[str, ...]) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") in kinds
        and isinstance(block.get("text"), str)
    ]


@dataclass
class _Turn:
    newest_key: str | None = None
    texts: list[str] | None = None
    ended_by: TurnEnd | None = None
    tokens: TokenTotals | None = None
    cost_usd: float | None = None

    def prompt(self) -> None:
        self.texts = []
        self.ended_by = None

    def assistant(self, key: str, texts: list[str]) -> None:
        self.newest_key = key
        self.ended_by = None
        if self.texts is None:
            self.texts = []
        self.texts.extend(t for t in texts if t.strip())

    def view(self) -> TurnView:
        text = "\n\n".join(self.texts or []) or None
        return TurnView(self.newest_key, text, self.ended_by, self.tokens, self.cost_usd)


def _claude_entry(
    turn: _Turn, entry: dict[str, Any], index: int, usage: dict[str, Any], costs: dict[str, float]
) -> None:
    kind = entry.get("type")
    if entry.get("isSidechain") is True:
        return
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if kind == "system" and entry.get("subtype") == "compact_boundary":
        turn.ended_by = TurnEnd.COMPACTION
    elif kind == "user":
        if entry.get("isCompactSummary") is True:
            turn.ended_by = TurnEnd.COMPACTION
            return
        texts = _texts(content, ("text",))
        if not texts:
            return  # tool results
        turn.prompt()
        if any(t.startswith(_INTERRUPT_PREFIX) for t in texts):
            turn.ended_by = TurnEnd.INTERRUPT
    elif kind == "assistant" and isinstance(message, dict):
        key = entry.get("uuid")
        turn.assistant(key if isinstance(key, str) else f"line-{index}", _texts(content, ("text",)))
        message_id = message.get("id")
        if isinstance(message.get("usage"), dict) and isinstance(message_id, str):
            usage[message_id] = message["usage"]  # the last line of a message has its final usage
        cost = entry.get("costUSD")
        if _is_cost(cost):
            costs[message_id if isinstance(message_id, str) else f"line-{index}"] = float(cost)


def _is_cost(value: object) -> TypeGuard[float]:
    """A finite, non-negative number (not a bool)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return math.isfinite(value) and value >= 0


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _claude_tokens(usage: dict[str, Any]) -> TokenTotals | None:
    if not usage:
        return None
    calls = [u for u in usage.values() if isinstance(u, dict)]
    return TokenTotals(
        input_tokens=sum(_count(u.get("input_tokens")) for u in calls),
        output_tokens=sum(_count(u.get("output_tokens")) for u in calls),
        cache_read_tokens=sum(_count(u.get("cache_read_input_tokens")) for u in calls),
        cache_write_tokens=sum(_count(u.get("cache_creation_input_tokens")) for u in calls),
    )


def _codex_entry(turn: _Turn, entry: dict[str, Any], index: int) -> None:
    kind = entry.get("type")
    payload = entry.get("payload")
    if kind == "compacted":
        turn.ended_by = TurnEnd.COMPACTION
        return
    if not isinstance(payload, dict):
        return
    item = payload.get("type")
    if kind == "event_msg":
        if item == "turn_aborted":
            turn.ended_by = TurnEnd.INTERRUPT
        elif item == "context_compacted":
            turn.ended_by = TurnEnd.COMPACTION
        elif item == "token_count":
            info = payload.get("info")
            total = info.get("total_token_usage") if isinstance(info, dict) else None
            if isinstance(total, dict):
                cached = _count(total.get("cached_input_tokens"))
                turn.tokens = TokenTotals(
                    input_tokens=max(_count(total.get("input_tokens")) - cached, 0),
                    output_tokens=_count(total.get("output_tokens")),
                    cache_read_tokens=cached,
                    cache_write_tokens=_count(total.get("cache_write_input_tokens")),
                )
        return
    if kind != "response_item":
        return
    key = payload.get("id") or payload.get("call_id")
    key = key if isinstance(key, str) else f"line-{index}"
    if item == "message" and payload.get("role") == "assistant":
        turn.assistant(key, _texts(payload.get("content"), ("output_text",)))
    elif item == "message" and payload.get("role") == "user":
        texts = _texts(payload.get("content"), ("input_text",))
        if texts and not all(t.lstrip().startswith("<environment_context>") for t in texts):
            turn.prompt()
    elif item in ("function_call", "custom_tool_call", "local_shell_call"):
        turn.assistant(key, [])


def summarize(agent: HookAgent, lines: Iterable[bytes]) -> TurnView:
    """Fold transcript lines (oldest first) into a ``TurnView``; lines that are not
    JSON objects are skipped."""
    turn = _Turn()
    usage: dict[str, Any] = {}
    costs: dict[str, float] = {}
    for index, line in enumerate(lines):
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            continue
        if not isinstance(entry, dict):
            continue
        if agent is HookAgent.CLAUDE:
            _claude_entry(turn, entry, index, usage, costs)
        else:
            _codex_entry(turn, entry, index)
    if agent is HookAgent.CLAUDE:
        turn.tokens = _claude_tokens(usage)
        turn.cost_usd = round(sum(costs.values()), 6) if costs else None
    return turn.view()


def read_turn(
    agent: HookAgent, path: str, max_bytes: int = MAX_TRANSCRIPT_BYTES
) -> TurnView | None:
    """Read the last ``max_bytes`` of the transcript at ``path`` and summarize them.

    Returns:
        The view, or None when the file cannot be read (missing, a folder, no
        permission); an empty file gives an empty view.
    """
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                handle.seek(size - max_bytes)
                handle.readline()  # a partial first line
            data = handle.read(max_bytes)
    except (OSError, ValueError):
        return None
    lines = data.split(b"\n")
    if data and not data.endswith(b"\n"):
        lines = lines[:-1]  # a line still being written
    return summarize(agent, (line for line in lines if line.strip()))
