"""What one attempt at an iteration produced, as plain facts: the input of ``conclude``.

The driver gathers these from the agent runner (how the process ended), the
adapter (its report and classification of the agent's output) and the workspace
(git), and hands them over; nothing here knows a vendor format. Recovery builds the
same value from an attempt's saved output when a driver died during it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec import Struct

from autopilot.core.vocabulary import EndedBy, Progress


class CommitSeen(Struct, frozen=True):
    """A commit made during the attempt: full sha, subject line, trailer lines."""

    sha: str
    subject: str
    trailers: tuple[str, ...] = ()


class Denial(Struct, frozen=True):
    """A tool call the agent CLI refused under a permission rule.

    Attributes:
        tool: The tool's name as the CLI calls it (``Bash``).
        command: The command it asked to run, else its main argument (None: neither).
    """

    tool: str
    command: str | None = None

    @property
    def key(self) -> str:
        """Identifies the denial: the same tool and command give the same key."""
        return f"{self.tool}\0{self.command or ''}"

    def describe(self) -> str:
        """``Bash `rm -rf build` `` — for people."""
        return f"{self.tool} `{self.command}`" if self.command else self.tool


class SessionTotals(Struct, frozen=True):
    """Token totals an agent reported for its whole session so far (Codex)."""

    session_id: str
    input_tokens: int
    output_tokens: int


class BacklogFacts(Struct, frozen=True):
    """What a backlog iteration did to its work item (gathered by ``loop.backlog``).

    Attributes:
        item_id: The item the iteration worked on.
        decision: The decision applied (None: the agent reported none).
        stop: The agent reported ``stop``.
        question: A person must answer this before the run goes on.
        done: No item is open any more and every completed item passed its checks.
        open_items: Items still open.
        item_closed: The item was completed, stopped, set aside for a person or
            blocked (progress, whatever the work tree shows: the run moves on).
        reopened_notice: The notice for the agent when the item was reopened.
        events: The item's events (``workitem_end``, ``workitem_recorded``,
            ``backlog_snapshot``, warnings), as (type, fields).
    """

    item_id: str
    decision: str | None = None
    stop: bool = False
    question: str | None = None
    done: bool = False
    open_items: int = 0
    item_closed: bool = False
    reopened_notice: str | None = None
    events: tuple[tuple[str, Mapping[str, Any]], ...] = ()


class Verification(Struct, frozen=True):
    """What the run's verify commands found when the agent gave the completion
    promise (gathered by ``loop.verify``; see ``core.verification``).

    Attributes:
        passed: Every verify command exited 0.
        results: One line per command, in order (``$ pytest -q: exit 1``).
        failing: The lines of the commands that did not pass.
        digest: ``sha256:<64 hex>`` of what ran and what it printed.
        failure: The failing commands and the tails of their output, for the next
            prompt (None when all passed).
    """

    passed: bool
    results: tuple[str, ...] = ()
    failing: tuple[str, ...] = ()
    digest: str | None = None
    failure: str | None = None


class Attempt(Struct, frozen=True):
    """Everything ``conclude`` needs to know about one attempt at an iteration.

    Attributes:
        number: The iteration's 1-based number.
        folder: The attempt's folder name (``iter-0003``, ``iter-0003.2``).
        prompt: The prompt sent (a promise echoed from it never counts).
        ended_by: Why the process stopped being read (``DRIVER_DIED``: recovered
            after a crash of the driver, from the saved output).
        exit_code: The process's exit status (``-N``: signal N; None: never ran).
        result_seen: The agent's final result event arrived.
        agent_failed: The agent's own output or exit says the attempt failed.
        usage_limited: ... because of a rate or usage limit that resets.
        fatal: ... and retrying cannot help (login refused, out of credit).
        agent_error: The agent's own error text, when it failed.
        launch_error: Why the process could not start (``LAUNCH_FAILED`` only).
        final_message: The root agent's final message (None: it gave none).
        last_root_text: The last root text seen (the response when there is no
            final message).
        tool_calls: Tool calls seen (None: the output cannot show them).
        session_id: The session id the agent reported (validated by its adapter).
        session_totals: Session-cumulative token totals, for agents that report them.
        input_tokens: This attempt's input tokens (None: not reported).
        output_tokens: This attempt's output tokens (None: not reported).
        cost_usd: This attempt's cost in USD (None: not reported).
        reset_at_ms: When a usage limit resets (epoch ms), if known.
        resumed_session: The session this attempt resumed (``--continue``), if any.
        denials: Tool calls the agent CLI refused under a permission rule.
        progress: Whether the work tree or HEAD changed.
        uncommitted_changes: The work tree has changes after the attempt (outside
            ``.autopilot/``); None outside a repository.
        commits: Commits made during the attempt, oldest first.
        files_changed: Paths changed (None outside a git repository).
        duration_ms: Wall time of the attempt.
        was_stopped: The agent was seen stopped (T state) and made no progress.
        oversized_lines: Output lines skipped for their size.
        raw_output_note: Why the raw output copy is incomplete, if it is.
        backlog: In a backlog run, what the iteration did to its work item.
        verification: What the verify commands found, when they ran after a
            completion promise (``--verify``).
    """

    number: int
    folder: str
    prompt: str
    ended_by: EndedBy
    exit_code: int | None = 0
    result_seen: bool = False
    agent_failed: bool = False
    usage_limited: bool = False
    fatal: bool = False
    agent_error: str | None = None
    launch_error: str | None = None
    final_message: str | None = None
    last_root_text: str | None = None
    tool_calls: int | None = 0
    session_id: str | None = None
    session_totals: SessionTotals | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    reset_at_ms: int | None = None
    resumed_session: str | None = None
    denials: tuple[Denial, ...] = ()
    progress: Progress = Progress.UNKNOWN
    uncommitted_changes: bool | None = None
    commits: tuple[CommitSeen, ...] = ()
    files_changed: int | None = None
    duration_ms: int = 0
    was_stopped: bool = False
    oversized_lines: int = 0
    raw_output_note: str | None = None
    backlog: BacklogFacts | None = None
    verification: Verification | None = None
