"""``autopilot list``, ``replay`` and ``where``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from autopilot.cli.control_cmds import status_text
from autopilot.cli.echo import say, say_json
from autopilot.config import parse_int
from autopilot.manage.activity import Activity, run_activity
from autopilot.store.index import read_index
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.reader import fold_log
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state_quietly
from autopilot.view.plain import format_event
from autopilot.view.safe import shown

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
    if rows and not as_json:
        say(f"{'started':<16}  {'run':<40} {'iteration':<10} status")
    now_ms = int(time.time() * 1000)
    for row in rows:
        folder = root / str(row["runId"])
        state = read_state_quietly(RunDir(folder).state)
        if as_json:
            say_json(
                dict(
                    row,
                    status=state.status if state else None,
                    reason=state.termination_reason if state else None,
                    iterations=state.iteration if state else None,
                )
            )
            continue
        if state is None:
            shown_status = "missing"
        elif not state.terminated and run_activity(folder, state) is Activity.GONE:
            shown_status = f"driver gone (autopilot start {folder.name} relaunches it)"
        else:
            shown_status = status_text(state, now_ms)
        started = row.get("ts") if isinstance(row.get("ts"), int) else row.get("startedAt")
        when = (
            time.strftime("%Y-%m-%d %H:%M", time.localtime(started / 1000))
            if isinstance(started, int)
            else "????-??-?? ??:??"
        )
        say(
            f"{when}  {shown(str(row['runId'])):<40} iter {state.iteration if state else '?'}/"
            f"{shown(str(row.get('maxIterations') or '∞')):<4} {shown(shown_status)}"
        )
    return 0


@click.command(context_settings=_CTX)
@click.option("--json", "as_json", is_flag=True, help="Print the folded snapshot as JSON.")
@click.argument("run_ref", metavar="RUN")
def replay(as_json: bool, run_ref: str) -> int:
    """Print RUN's events, one line each, then its final picture."""
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
    reason = f" ({snapshot.reason})" if snapshot.reason else ""
    summary = (
        f"-- {run_id}: {snapshot.status}{reason}, "
        f"iteration {snapshot.iteration}, tokens {tokens['input']}/{tokens['output']}, "
        f"cost ${snapshot.costUsd:.4f}"
    )
    out.write(shown(summary) + "\n")
    return 0


@click.command(context_settings=_CTX)
def where() -> int:
    """Print the runs root (set it with AUTOPILOT_RUNS_DIR)."""
    say(str(runs_root(create=False)))
    return 0


_ = Path
