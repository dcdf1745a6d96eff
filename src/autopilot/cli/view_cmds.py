"""``autopilot list``, ``replay`` and ``where``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from autopilot.cli.control_cmds import status_text, worktree_of
from autopilot.cli.echo import say, say_json
from autopilot.config_values import parse_int
from autopilot.core.ending import describe_ending
from autopilot.core.vocabulary import RunStatus
from autopilot.manage.activity import Activity, run_activity, settled_state
from autopilot.store.finished import FinishedRuns, file_key
from autopilot.store.index import read_index
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state_quietly
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
    count = parse_int(limit, name="--limit", minimum=1) if limit is not None else None
    root = runs_root(create=False)
    rows = list(read_index(root))[::-1]
    if count is not None:
        rows = rows[:count]
    finished = FinishedRuns(root)
    if count is None:
        finished.keep_only({str(row["runId"]) for row in rows})
    lines = [f"{'started':<16}  {'run':<40} {'iteration':<10} status"] if rows else []
    now_ms = int(time.time() * 1000)
    for row in rows:
        run_id = str(row["runId"])
        shown_row = _list_row(root, run_id, finished, now_ms)
        if as_json:
            fields = ("status", "reason", "iterations", "worktree")
            say_json(dict(row, **{k: shown_row[k] for k in fields}))
            continue
        started = row.get("ts") if isinstance(row.get("ts"), int) else row.get("startedAt")
        when = (
            time.strftime("%Y-%m-%d %H:%M", time.localtime(started / 1000))
            if isinstance(started, int)
            else "????-??-?? ??:??"
        )
        iteration = shown_row["iterations"]
        lines.append(
            f"{when}  {_one_line(run_id):<40} iter {'?' if iteration is None else iteration}/"
            f"{_one_line(str(row.get('maxIterations') or '∞')):<4} {_one_line(shown_row['text'])}"
            + (
                f"  (worktree, branch {_one_line(branch)})"
                if (branch := _branch(shown_row))
                else ""
            )
        )
    if not as_json and lines:
        say("\n".join(lines))  # redacted and escaped as a whole
    finished.save()
    return 0


def _one_line(text: str) -> str:
    """A field of a ``list`` line: ``shown`` on one line. A printable field has no
    control or line break to escape, and ``say`` redacts the whole output."""
    return text if text.isprintable() else shown(text)


def _branch(shown_row: dict[str, Any]) -> str | None:
    """A ``--worktree`` run's branch, from its ``list`` row."""
    worktree = shown_row.get("worktree")
    branch = worktree.get("branch") if isinstance(worktree, dict) else None
    return branch if isinstance(branch, str) else None


_LIST_FIELDS = ("status", "reason", "iterations", "text", "worktree")


def _list_row(root: Path, run_id: str, finished: FinishedRuns, now_ms: int) -> dict[str, Any]:
    """What ``list`` shows of a run: ``status``, ``reason``, ``iterations``, ``text``
    (its status in words) and ``worktree`` (a ``--worktree`` run's, else None); an
    ended run's from ``finished.json`` when it is current."""

    key = file_key(f"{root}/{run_id}")
    cached = finished.get(run_id, "list", key)
    if isinstance(cached, list) and len(cached) == len(_LIST_FIELDS):
        return dict(zip(_LIST_FIELDS, cached, strict=True))
    folder = root / run_id
    state = read_state_quietly(RunDir(folder).state)
    if state is None:
        return {
            "status": None,
            "reason": None,
            "iterations": None,
            "text": "missing",
            "worktree": None,
        }
    state = settled_state(folder, state)  # the log's ending over a state.json left behind
    worktree = worktree_of(state)
    if not state.terminated and run_activity(folder, state) is Activity.GONE:
        text = f"driver gone (autopilot start {folder.name} relaunches it)"
    else:
        text = status_text(state, now_ms)
    shown_row = {
        "status": str(state.status),
        "reason": state.termination_reason,
        "iterations": state.iteration,
        "text": text,
        "worktree": worktree,
    }
    if state.terminated:
        finished.put(run_id, "list", key, [shown_row[name] for name in _LIST_FIELDS])
    return shown_row


@click.command(context_settings=_CTX)
@click.option("--json", "as_json", is_flag=True, help="Print the folded snapshot as JSON.")
@click.argument("run_ref", metavar="RUN")
def replay(as_json: bool, run_ref: str) -> int:
    """Print RUN's events, one line each, then its final picture."""
    from autopilot.store.reader import fold_log  # msgspec and the fold: only for a log

    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref)
    path = RunDir(run_dir(root, run_id)).events
    if as_json:
        snapshot, _ = fold_log(path)
        say_json(snapshot.to_dict(), indent=2)
        return 0
    # One streaming pass: memory stays flat on a million-event log.
    out = sys.stdout

    def show(event: dict[str, Any]) -> None:
        out.write(format_event(event) + "\n")

    snapshot, _ = fold_log(path, on_event=show)
    tokens = snapshot.tokens
    summary = (
        f"-- {run_id}: {_replayed_status(snapshot)}, "
        f"iteration {snapshot.iteration}, tokens {tokens['input']}/{tokens['output']}, "
        f"cost ${snapshot.costUsd:.4f}"
    )
    out.write(shown(summary) + "\n")
    return 0


def _replayed_status(snapshot: Snapshot) -> str:
    """The folded run's status in autopilot's words, as ``status`` says them:
    ``budget reached (max_iterations)``, ``running``, ``paused (…)``."""
    if snapshot.terminal:
        completed = snapshot.run_status is RunStatus.COMPLETED
        return describe_ending(snapshot.reason, completed=completed)
    reason = f" ({snapshot.reason})" if snapshot.reason else ""
    return f"{snapshot.run_status}{reason}"


@click.command(context_settings=_CTX)
def where() -> int:
    """Print the runs root (set it with AUTOPILOT_RUNS_DIR)."""
    say(str(runs_root(create=False)))
    return 0


_ = Path
