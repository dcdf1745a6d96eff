"""The names of a run folder's files (``store.rundir`` describes each), in a module
that loads nothing: the control commands find a run's ``state.json`` and
``driver.lock`` without ``RunDir`` (a msgspec Struct, and msgspec with it)."""

from __future__ import annotations

import os

STATE_FILE = "state.json"
EVENTS_FILE = "events.jsonl"
DRIVER_LOCK_FILE = "driver.lock"
APPROVED_RUN_COPY = "approved-run.json"
GIT_FILTERS_FILE = "git-filters.json"
LAUNCH_FILE = "launch.json"
ITEM_MARKS_DIR = "item-marks"
PROMPT_FILE = "prompt.md"
STDOUT_FILE = "stdout.log"
STDERR_FILE = "stderr.log"
WORK_ITEM_FILE = "workitem.json"
"""In an attempt's folder of a backlog run: the work item it is on and the work tree's
mark before it (``loop.backlog_recovery``)."""
ATTEMPT_PREFIX = "iter-"


def has_records(folder: str | os.PathLike[str]) -> bool:
    """The run folder holds a ``state.json`` or an ``events.jsonl`` (a run's records)."""
    return os.path.exists(os.path.join(folder, STATE_FILE)) or os.path.exists(
        os.path.join(folder, EVENTS_FILE)
    )
