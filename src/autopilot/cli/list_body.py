"""The body of ``autopilot list``, without click: the command line (``cli.view_cmds``)
and the fast path (``cli.fast``) both call it.

A run in ``finished.json`` costs one ``stat`` (``store.finished``); a run whose driver
runs here is read from ``state.json`` as plain JSON (``_running_row``); any other run
is read the typed way (``_fresh_row``). The values a line takes from the runs are
redacted and escaped value by value (``cli.list_text``).
"""

from __future__ import annotations

import time
from operator import itemgetter

from autopilot.cli.echo import say_json, write_line
from autopilot.cli.list_fit import all_fit, columns_fit, fits
from autopilot.cli.list_text import list_text
from autopilot.store.bulk import CollectorOff, keep_until_exit
from autopilot.store.finished import FinishedRuns, file_key
from autopilot.store.index import read_index
from autopilot.store.paths import runs_root_path

# What a run not yet in ``finished.json`` needs (its typed ``state.json``, its
# driver, its status in words) and the redaction of what a row shows are loaded by
# the functions that use them: a list of ended runs, or a short one, needs little.

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any


def list_runs(as_json: bool, limit: str | None) -> int:
    """``autopilot list [--json] [--limit N]``; its exit code."""
    with CollectorOff():
        return _list_runs(as_json, limit)


def _list_runs(as_json: bool, limit: str | None) -> int:
    if limit is not None:
        from autopilot.config_values import parse_int

        count: int | None = parse_int(limit, name="--limit", minimum=1)
    else:
        count = None
    root = runs_root_path(create=False)  # a string: pathlib is loaded for a fresh row only
    finished = FinishedRuns(root, "list")
    if as_json:
        rows = list(read_index(root))[::-1][:count]
        run_ids: list[str] = list(map(itemgetter("runId"), rows))  # strings (``read_index``)
    else:
        run_ids, starts, most = (column[::-1][:count] for column in _index_columns(root, finished))
    unclaimed = _unclaimed_until(root)
    if count is None:
        finished.keep_only(set(run_ids))
    now_ms = int(time.time() * 1000)
    if not as_json and run_ids:  # every run kept and unchanged: from the columns at once
        kept = finished.kept_columns(root, run_ids, _still_gone)
        if kept is not None and columns_fit(kept):
            write_line(list_text(run_ids, starts, most, kept, unclaimed, now_ms))
            finished.save()  # the index's view, if it changed
            keep_until_exit(run_ids, finished, kept)
            return 0
    found, keys = finished.lookup(root, run_ids, _still_gone)
    if not as_json:
        shown = _found_text(root, run_ids, starts, most, found, keys, finished, unclaimed, now_ms)
        if shown is not None:
            write_line(shown)
        finished.save()
        keep_until_exit(run_ids, finished, found, keys)
        return 0
    for row, run_id in zip(rows, run_ids, strict=True):
        shown_row = found.get(run_id)
        if not fits(shown_row):
            key = keys[run_id] if run_id in keys else file_key(f"{root}/{run_id}")
            shown_row = _fresh_row(_folder(root, run_id), key, finished, now_ms)
        status, reason, iterations, _, worktree = shown_row
        shown_row = {"status": status, "reason": reason, "iterations": iterations}
        say_json(dict(row, **shown_row, worktree=worktree))
    finished.save()
    keep_until_exit(rows, finished, found, keys)
    return 0


def _index_columns(root: str, finished: FinishedRuns) -> list[list[Any]]:
    """What ``list`` shows of each row of ``index.jsonl``, oldest first, a column a
    field: the run id, its start (epoch ms: its ``ts`` when an int, else its
    ``startedAt`` when an int, else None) and the most iterations shown (``∞``
    without a limit); kept in ``finished.json`` while the index is unchanged
    (``FinishedRuns.index_columns``)."""
    return finished.index_columns(root, _columns_of, _columns_fit)


def _columns_of(rows: Iterator[dict[str, Any]]) -> list[list[Any]]:
    listed = list(rows)
    columns = [list(map(itemgetter("runId"), listed)), list(map(_start_of, listed))]
    return [*columns, [str(row.get("maxIterations") or "∞") for row in listed]]


def _columns_fit(columns: list[list[Any]]) -> bool:
    """Are ``columns`` as ``_columns_of`` makes them: int or None starts, string
    limits?"""
    return (
        len(columns) == 3
        and set(map(type, columns[1])) <= {int, type(None)}
        and set(map(type, columns[2])) <= {str}
    )


def _start_of(row: dict[str, Any]) -> int | None:
    """A row's start (epoch ms): its ``ts`` when an int, else its ``startedAt`` when
    an int, else None."""
    at = row.get("ts")
    if not isinstance(at, int):
        at = row.get("startedAt")
    return int(at) if isinstance(at, int) else None  # int(): true is 1, as JSON keeps it


def _found_text(
    root: str,
    run_ids: list[str],
    starts: list[int | None],
    most: list[str],
    found: dict[str, Any],
    keys: dict[str, list[int] | None],
    finished: FinishedRuns,
    unclaimed: dict[str, int],
    now_ms: int,
) -> str | None:
    """The text of ``list`` (None without a run) from the runs' shown values ``found``
    (``FinishedRuns.lookup``): in C where every run's value is of the usual types,
    else run by run, a run not kept (or kept of other types) read from its files."""
    if not run_ids:
        return None
    shown: list[Any] = list(map(found.get, run_ids))
    if not all_fit(shown):
        for index, shown_row in enumerate(shown):  # a run not kept: read from its files
            if not fits(shown_row):
                run_id = run_ids[index]
                key = keys[run_id] if run_id in keys else file_key(f"{root}/{run_id}")
                shown[index] = _fresh_row(_folder(root, run_id), key, finished, now_ms)
    columns = [list(column) for column in zip(*shown, strict=True)]
    return list_text(run_ids, starts, most, columns, unclaimed, now_ms)


def _folder(root: str, run_id: str) -> Path:
    from pathlib import Path

    return Path(root, run_id)


def _unclaimed_until(root: str) -> dict[str, int]:
    """The hook runs still waiting for a session to claim them, with the end of their
    claim window (epoch ms); those whose window passed are ended first
    (``hook.control.expire_unclaimed``, without waiting for a Stop being answered)."""
    from autopilot.store.hook_armed import anything_armed

    if not anything_armed(root):
        return {}
    from pathlib import Path

    from autopilot.hook.control import expire_unclaimed
    from autopilot.loop.clock import SystemClock
    from autopilot.store.hook_registry import load_armings

    expire_unclaimed(Path(root), SystemClock(), wait_seconds=0)
    armings, _ = load_armings(Path(root))
    return {a.run_id: a.claim_until_ms for a in armings if not a.session_id}


_LIST_FIELDS = ("status", "reason", "iterations", "text", "worktree")


def _still_gone(where: str, driver: list[Any]) -> bool:
    from autopilot.runtime.liveness import still_gone

    return still_gone(where, driver)


def _fresh_row(
    folder: Path, key: list[int] | None, finished: FinishedRuns, now_ms: int
) -> list[Any]:
    """What ``list`` shows of a run, as ``_LIST_FIELDS``: ``status``, ``reason``,
    ``iterations``, ``text`` (its status in words) and ``worktree`` (a
    ``--worktree`` run's, else None), read from its files (``state.json``, its
    driver, the end of its log); kept in ``finished`` under ``key`` (its files before
    they were read) when its files change no more."""
    if "\0" in folder.name:  # no such file can exist (and open() refuses the name)
        return [None, None, None, "missing", None]
    running = _running_row(folder, now_ms)
    if running is not None:
        return running
    from autopilot.cli.control_body import status_text, worktree_of
    from autopilot.manage.activity import Activity, run_activity, settled_state
    from autopilot.runtime.liveness import driver_record
    from autopilot.store.rundir import RunDir
    from autopilot.store.state import read_state_quietly

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
        finished.put(folder.name, key, shown_row, driver)
    return shown_row


def _running_row(folder: Path, now_ms: int) -> list[Any] | None:
    """``_fresh_row`` of a run whose driver runs here, read from its ``state.json`` as
    plain JSON (a live run's list needs neither the typed ``RunState`` nor the code
    that settles an ended or abandoned one), its words made by the same
    ``control_body.status_text`` as the typed row's (pause or stop requested, OFF,
    gate, hold); None for any other run (read the typed way): ended, a hook or
    parallel run, a ``status`` or agent the typed reader derives, its driver not
    found alive by pid and identity on this host, or a state file the typed reader
    refuses (``store.state_file.check_state_json``: the typed way shows it as
    ``missing``, as ``status`` calls it corrupt).
    """
    from autopilot.cli.status_light import StatusView, config_decides
    from autopilot.core.run_words import HOOK_MODE
    from autopilot.errors import StateFileError
    from autopilot.store.state_file import check_state_json, read_state_json

    path = folder / "state.json"
    try:
        data = read_state_json(path)
        check_state_json(data, path)
    except StateFileError:
        return None
    if data.get("status") not in _STATUS_WORDS or data.get("terminated"):
        return None
    if data.get("mode") == HOOK_MODE or "parallel" in data or config_decides(data):
        return None
    pid, start, command, host = (data.get(k) for k in ("pid", "pidStartTime", "pidCommand", "host"))
    if not isinstance(pid, int) or isinstance(pid, bool):
        return None
    if start is not None and (isinstance(start, bool) or not isinstance(start, int | float)):
        return None
    if not (command is None or isinstance(command, str)):
        return None
    from _socket import gethostname

    if not (host is None or host == gethostname()):  # ``liveness.driver_running``'s lock
        return None
    from autopilot.runtime.liveness import process_alive

    if process_alive(pid, start, command, host) is not True:
        return None
    from autopilot.cli.control_body import status_text, worktree_of

    view = StatusView(data)
    return [data["status"], None, view.iteration, status_text(view, now_ms), worktree_of(view)]


_STATUS_WORDS = frozenset(
    ("planning", "running", "paused", "waiting", "rate_limited", "gated", "awaiting_user", "idle")
)
"""The statuses of a run not ended (``core.run_words.RunStatus``) listed from plain
JSON; any other word is the typed reader's to derive."""
