"""``autopilot list``, ``replay`` and ``where``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from autopilot.cli import list_body
from autopilot.cli.echo import say, say_json
from autopilot.core.ending import describe_ending
from autopilot.core.vocabulary import HOOK_MODE, EventType, RunStatus
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.rundir import RunDir
from autopilot.view.plain import format_event
from autopilot.view.safe import shown

if TYPE_CHECKING:
    from autopilot.store.snapshot import Snapshot

_CTX = {"help_option_names": ["-h", "--help"]}


@click.command("list", context_settings=_CTX)
@click.option("--json", "as_json", is_flag=True, help="Print the index rows as JSON lines.")
@click.option("--limit", "limit", metavar="N", help="Show at most N runs.")
def list_runs(as_json: bool, limit: str | None) -> int:
    """List runs, newest first."""
    return list_body.list_runs(as_json, limit)


@click.command(context_settings=_CTX)
@click.option("--json", "as_json", is_flag=True, help="Print the folded snapshot as JSON.")
@click.argument("run_ref", metavar="RUN", required=False)
def replay(as_json: bool, run_ref: str | None) -> int:
    """Print RUN's events, one line each, then its final picture.

    RUN defaults to this project's run (the one not ended, else the newest)."""
    from autopilot.store.reader import fold_log  # msgspec and the fold: only for a log

    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    path = RunDir(run_dir(root, run_id)).events
    if as_json:
        snapshot, _ = fold_log(path)
        say_json(snapshot.to_dict(), indent=2)
        return 0
    # One streaming pass: memory stays flat on a million-event log.
    out = sys.stdout
    cost = _CostSeen()
    gate = _GateSeen()

    def show(event: dict[str, Any]) -> None:
        out.write(format_event(event) + "\n")
        cost.note(event)
        gate.note(event)

    snapshot, _ = fold_log(path, on_event=show)
    tokens = snapshot.tokens
    summary = (
        f"-- {run_id}: {_replayed_status(snapshot, gate.question)}, "
        f"iteration {snapshot.iteration}, tokens {tokens['input']}/{tokens['output']}, "
        + (
            f"cost ${snapshot.costUsd:.4f}"
            if cost.known or snapshot.costUsd > 0
            else "cost unknown (the session's transcript records no cost)"
        )
    )
    out.write(shown(summary) + "\n")
    return 0


class _CostSeen:
    """Whether a run's log knows its cost: a hook run's does only where an iteration
    recorded one (``iterationCostUsd``), as ``status`` says (``hook.status``)."""

    def __init__(self) -> None:
        self.hook = False
        self.recorded = False

    def note(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == EventType.ARMED.value:
            self.hook = event.get("mode") == HOOK_MODE
        elif kind == EventType.ITERATION_END.value:
            cost = event.get("iterationCostUsd")
            self.recorded |= isinstance(cost, int | float) and not isinstance(cost, bool)

    @property
    def known(self) -> bool:
        return not self.hook or self.recorded


class _GateSeen:
    """The question a run waits on a person for: the last ``gate`` not followed by an
    answer, a new iteration or a resume (``question`` None when there is none)."""

    def __init__(self) -> None:
        self.question: str | None = None

    def note(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == EventType.GATE.value:
            question = event.get("question")
            self.question = question if isinstance(question, str) else "a question"
        elif kind in _GATE_CLOSERS or (
            kind == EventType.MESSAGE_QUEUED.value and event.get("kind") == "answer"
        ):
            self.question = None


_GATE_CLOSERS = frozenset(
    kind.value
    for kind in (EventType.ITERATION_START, EventType.RESUME, EventType.COMPLETE, EventType.ABORT)
)


def _replayed_status(snapshot: Snapshot, question: str | None = None) -> str:
    """The folded run's status in autopilot's words, as ``status`` says them:
    ``budget reached (max_iterations)``, ``running``, ``paused (…)``, and
    ``awaiting_user — waits for your answer: …`` while a ``gate``'s question is open."""
    if snapshot.terminal:
        completed = snapshot.run_status is RunStatus.COMPLETED
        return describe_ending(snapshot.reason, completed=completed)
    if question is not None:
        return f"{RunStatus.AWAITING_USER} — waits for your answer: {question}"
    reason = f" ({snapshot.reason})" if snapshot.reason else ""
    return f"{snapshot.run_status}{reason}"


@click.command(context_settings=_CTX)
def where() -> int:
    """Print the runs root (set it with AUTOPILOT_RUNS_DIR)."""
    say(str(runs_root(create=False)))
    return 0


_ = Path
