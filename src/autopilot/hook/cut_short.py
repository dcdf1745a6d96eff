"""A Stop cut short while it ended an iteration (``kill -9``, the CLI's hook timeout).

Ending an iteration can take minutes (a work item's checks), and nothing of it is
recorded until its end: the run's ``iteration_end`` and ``state.json`` come last. So
before it starts, the Stop writes what it saw of the iteration to
``iter-NNNN/stop-ending.json`` (atomically) and removes the file once the iteration is
recorded::

    {"iteration": 3, "finalMessage": "…", "inputTokens": 1200, "outputTokens": 80,
     "costUsd": null, "durationMs": 61000, "progress": "made",
     "changedPaths": ["a.md"], "reports": ["1796…-812-0.json"]}

``reports`` are the agent's reports that were waiting then, which the Stop claims
(``store.reports``). The file is found by the next Stop of the session (or ``autopilot
stop``), which holds the registry's lock, so the Stop that wrote it is gone: the
checks it left running (they carry the run's ``AUTOPILOT_RUN_ID``) are ended, the
reports it claimed are put back to wait, and the iteration is ended from the file,
``endedBy`` ``killed``, through the same ``conclude``: one ``iteration_end``, never
none and never two.

A Stop whose writes failed part way (a full disk: the log took the step's events,
``state.json`` refused the change) is settled from the log instead
(``settle_logged``): the open iteration's ``decision_applied`` is absorbed, not
concluded again, and a logged terminal event ends the run, whatever fails next.

Checks that always outlast the Stop are ``hook.slow_checks``'s.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autopilot.core.ending import describe_ending
from autopilot.core.structs import assign
from autopilot.core.vocabulary import EventType, Progress
from autopilot.hook.transcript import TurnView
from autopilot.hook.tree_mark import changed_since, mark_now
from autopilot.loop.leftovers import end_leftovers
from autopilot.loop.record import RunRecord
from autopilot.loop.step_state import absorb
from autopilot.store.atomic import write_atomically
from autopilot.store.events import read_events
from autopilot.store.hook_registry import Arming
from autopilot.store.logged_end import ended_as_logged, logged_decision, logged_ending
from autopilot.store.reports import REPORTS_DIR, put_back_claimed
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir

ENDING_FILE = "stop-ending.json"
"""In an iteration's folder while a Stop ends that iteration."""


@dataclass(frozen=True)
class Ending:
    """What a Stop saw of the iteration it was ending (see the module docstring)."""

    iteration: int
    final_message: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    duration_ms: int
    progress: Progress
    changed_paths: tuple[str, ...]
    reports: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """The file's JSON object."""
        return {
            "iteration": self.iteration,
            "finalMessage": self.final_message,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "costUsd": self.cost_usd,
            "durationMs": self.duration_ms,
            "progress": self.progress.value,
            "changedPaths": list(self.changed_paths),
            "reports": list(self.reports),
        }


def waiting_reports(run_folder: Path) -> tuple[str, ...]:
    """The names of the reports waiting in the run's folder now."""
    try:
        names = os.listdir(run_folder / REPORTS_DIR)
    except OSError:
        return ()
    return tuple(sorted(n for n in names if n.endswith(".json")))


def begin_ending(folder: Path, ending: Ending) -> None:
    """Write ``ending`` into the iteration's ``folder`` before ending it.

    Raises:
        OSError: it cannot be written (nothing of the iteration's end is done then).
    """
    data = json.dumps(ending.to_json(), ensure_ascii=False).encode("utf-8", "replace")
    write_atomically(folder / ENDING_FILE, data, mode=0o600)


def ending_done(folder: Path) -> None:
    """The iteration's end is recorded: its file goes."""
    with contextlib.suppress(FileNotFoundError):
        (folder / ENDING_FILE).unlink()


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def read_ending(folder: Path, iteration: int) -> Ending | None:
    """The ending a Stop cut short left in ``folder``, or None (none, another
    iteration's, or unreadable: the iteration is then ended from what this Stop sees)."""
    try:
        raw = json.loads((folder / ENDING_FILE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or raw.get("iteration") != iteration:
        return None
    final, cost = raw.get("finalMessage"), raw.get("costUsd")
    paths, reports = raw.get("changedPaths"), raw.get("reports")
    try:
        progress = Progress(str(raw.get("progress")))
    except ValueError:
        progress = Progress.UNKNOWN
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        paths = []
    if not isinstance(reports, list) or not all(isinstance(r, str) for r in reports):
        reports = []
    return Ending(
        iteration=iteration,
        final_message=final if isinstance(final, str) else None,
        input_tokens=_int_or_none(raw.get("inputTokens")),
        output_tokens=_int_or_none(raw.get("outputTokens")),
        cost_usd=float(cost)
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0
        else None,
        duration_ms=_int_or_none(raw.get("durationMs")) or 0,
        progress=progress,
        changed_paths=tuple(paths),
        reports=tuple(r for r in reports if os.path.basename(r) == r and r.endswith(".json")),
    )


def clean_up_after(run_id: str, run_folder: Path, ending: Ending) -> int:
    """What the Stop that was cut short left: its checks' processes are ended (those
    carrying the run's id, and their process groups) and the reports it had claimed
    are put back to wait. Call holding the registry's lock.

    Returns:
        How many processes were ended.
    """
    ended = end_leftovers(run_id, agent_pid=None, agent_started=None)
    put_back_claimed(run_folder, ending.iteration, ending.reports)
    return ended


def settle_logged(record: RunRecord, folder: RunDir) -> str | None:
    """Make ``state.json`` say what an earlier Stop logged but could not write there:
    the open iteration's logged decision is absorbed (its ``iteration_end`` is not
    written again), and a logged terminal event ends the run.

    Returns:
        How the run ended, in ``status``'s words, once it has; else None.

    Raises:
        StateFileError: ``state.json`` cannot be written (nothing is logged then).
    """
    state = record.state
    if state.iteration_open:
        iteration_folder = folder.attempt(state.iteration).path
        change = logged_decision(folder.events, iteration_folder.name)
        if change is not None:
            record.update(lambda s: absorb(s, change))
            ending_done(iteration_folder)
    if not record.state.terminated:
        logged = logged_ending(folder.events, record.state)
        if logged is not None:

            def end(s: RunState) -> None:
                assign(s, ended_as_logged(s, logged))

            record.update(end)
    ended = record.state
    if not ended.terminated:
        return None
    return describe_ending(ended.termination_reason, completed=ended.completed)


def start_logged(events: Path, number: int) -> bool:
    """True when the log's newest iteration is ``number``, started and not ended (a
    Stop logged its ``iteration_start`` and could not write ``state.json``)."""
    newest: int | None = None
    for event in read_events(events):
        kind = event.get("type")
        if kind == EventType.ITERATION_START.value:
            newest = event.get("iteration") if isinstance(event.get("iteration"), int) else None
        elif kind == EventType.ITERATION_END.value:
            newest = None
    return newest == number


def seen_ending(
    arming: Arming,
    number: int,
    folder: Path,
    cwd: Path,
    final: str | None,
    turn: TurnView | None,
    now_ms: int,
    *,
    changed: bool,
    warn: Callable[[str], None],
) -> Ending:
    """What a Stop sees of the open iteration ``number`` (its folder ``folder``, the
    work tree ``cwd``): the turn's text ``final``, the tokens and cost since it started
    (``arming`` holds the session's totals then), its time until ``now_ms``, the work
    tree's progress and (``changed``: a backlog run's) changed paths, the reports
    waiting in the run's folder."""
    tokens = turn.tokens if turn is not None else None
    input_tokens = output_tokens = None
    if tokens is not None:
        input_tokens = max(tokens.input_tokens - arming.input_tokens, 0)
        output_tokens = max(tokens.output_tokens - arming.output_tokens, 0)
    session_cost = turn.cost_usd if turn is not None else None
    cost_usd = None  # unknown: the transcript records no cost
    if session_cost is not None:
        cost_usd = round(max(session_cost - (arming.cost_usd or 0.0), 0.0), 6)
    mark = mark_now(cwd, warn)
    # As ``workspace.marks.progress_between``: the fingerprint holds every branch
    # tip and HEAD's recent reflog, so a new commit anywhere, or HEAD on a commit no
    # branch held, changes it; a checkout of an existing branch does not.
    if mark.fingerprint is None:
        progress = Progress.UNKNOWN
    elif mark.fingerprint != arming.tree_fingerprint:
        progress = Progress.MADE
    else:
        progress = Progress.NONE
    paths = changed_since(folder, cwd, mark, warn) if changed else []
    return Ending(
        iteration=number,
        final_message=final,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=cost_usd,
        duration_ms=max(now_ms - arming.iteration_started_at_ms, 0)
        if arming.iteration_started_at_ms
        else 0,
        progress=progress,
        changed_paths=tuple(paths),
        reports=waiting_reports(folder.parent),
    )
