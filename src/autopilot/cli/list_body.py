"""The body of ``autopilot list``, without click: the command line (``cli.view_cmds``)
and the fast path (``cli.fast``) both call it."""

from __future__ import annotations

import time
from pathlib import Path

from autopilot.cli.control_body import status_text, worktree_of
from autopilot.cli.echo import say, say_json
from autopilot.config_values import parse_int
from autopilot.manage.activity import Activity, run_activity, settled_state
from autopilot.runtime.liveness import driver_record, still_gone
from autopilot.store.bulk import CollectorOff
from autopilot.store.finished import FinishedRuns, file_key
from autopilot.store.index import read_index
from autopilot.store.paths import runs_root
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state_quietly
from autopilot.view.plain import format_moment
from autopilot.view.safe import shown

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def list_runs(as_json: bool, limit: str | None) -> int:
    """``autopilot list [--json] [--limit N]``; its exit code."""
    with CollectorOff():
        return _list_runs(as_json, limit)


def _list_runs(as_json: bool, limit: str | None) -> int:
    count = parse_int(limit, name="--limit", minimum=1) if limit is not None else None
    root = runs_root(create=False)
    rows = list(read_index(root))[::-1]
    if count is not None:
        rows = rows[:count]
    unclaimed = _unclaimed_until(root)
    finished = FinishedRuns(root)
    if count is None:
        finished.keep_only({str(row["runId"]) for row in rows})
    lines = [f"{'started':<16}  {'run':<40} {'iteration':<10} status"] if rows else []
    now_ms = int(time.time() * 1000)
    minutes: dict[int, str] = {}
    for row in rows:
        run_id = str(row["runId"])
        status, reason, iterations, text, worktree = _list_row(root, run_id, finished, now_ms)
        if run_id in unclaimed and reason is None:
            until = format_moment(unclaimed[run_id], day_of_ms=now_ms)
            text = f"armed, unclaimed until {until} (no session has stopped yet)"
        if as_json:
            shown_row = {"status": status, "reason": reason, "iterations": iterations}
            say_json(dict(row, **shown_row, worktree=worktree))
            continue
        started = row.get("ts")
        if not isinstance(started, int):
            started = row.get("startedAt")
        when = _minute(started, minutes) if isinstance(started, int) else "????-??-?? ??:??"
        branch = worktree.get("branch") if isinstance(worktree, dict) else None
        on_branch = f"  (worktree, branch {_one_line(branch)})" if isinstance(branch, str) else ""
        lines.append(
            f"{when}  {_one_line(run_id):<40} iter {'?' if iterations is None else iterations}/"
            f"{_one_line(str(row.get('maxIterations') or '∞')):<4} {_one_line(text)}"
            + (on_branch if branch else "")
        )
    if not as_json and lines:
        say("\n".join(lines))  # redacted and escaped as a whole
    finished.save()
    return 0


def _minute(ms: int, shown: dict[int, str]) -> str:
    """The local minute of epoch ``ms`` (``2026-12-02 05:22``), kept in ``shown`` by
    minute: runs started in the same minute share it (a time zone's offset changes on
    a whole minute)."""
    minute = ms // 60_000
    text = shown.get(minute)
    if text is None:
        text = shown[minute] = time.strftime("%Y-%m-%d %H:%M", time.localtime(minute * 60))
    return text


def _unclaimed_until(root: Path) -> dict[str, int]:
    """The hook runs still waiting for a session to claim them, with the end of their
    claim window (epoch ms); those whose window passed are ended first
    (``hook.control.expire_unclaimed``, without waiting for a Stop being answered)."""
    from autopilot.store.hook_armed import anything_armed

    if not anything_armed(str(root)):
        return {}
    from autopilot.hook.control import expire_unclaimed
    from autopilot.loop.clock import SystemClock
    from autopilot.store.hook_registry import load_armings

    expire_unclaimed(root, SystemClock(), wait_seconds=0)
    armings, _ = load_armings(root)
    return {a.run_id: a.claim_until_ms for a in armings if not a.session_id}


def _one_line(text: str) -> str:
    """A field of a ``list`` line: ``shown`` on one line. A printable field has no
    control or line break to escape, and ``say`` redacts the whole output."""
    return text if text.isprintable() else shown(text)


_LIST_FIELDS = ("status", "reason", "iterations", "text", "worktree")


def _list_row(root: Path, run_id: str, finished: FinishedRuns, now_ms: int) -> list[Any]:
    """What ``list`` shows of a run, as ``_LIST_FIELDS``: ``status``, ``reason``,
    ``iterations``, ``text`` (its status in words) and ``worktree`` (a
    ``--worktree`` run's, else None); an ended run's from ``finished.json`` when it
    is current."""

    where = f"{root}/{run_id}"
    key = file_key(where)
    cached = finished.get(run_id, "list", key, lambda driver: still_gone(where, driver))
    if isinstance(cached, list) and len(cached) == len(_LIST_FIELDS):
        return cached
    folder = root / run_id
    state = read_state_quietly(RunDir(folder).state)
    if state is None:
        return [None, None, None, "missing", None]
    state = settled_state(folder, state)  # the log's ending over a state.json left behind
    worktree = worktree_of(state)
    gone = not state.terminated and run_activity(folder, state) is Activity.GONE
    if gone:
        text = f"driver gone (autopilot start {folder.name} relaunches it)"
    else:
        text = status_text(state, now_ms)
    shown_row = [str(state.status), state.termination_reason, state.iteration, text, worktree]
    if state.terminated or gone:  # its files change no more (until a driver is back)
        driver = driver_record(state) if gone else None
        finished.put(run_id, "list", key, shown_row, driver)
    return shown_row
