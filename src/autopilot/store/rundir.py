"""``RunDir``: every path of a run folder, named in one place (``docs/formats.md``).

A run folder is ``<runs-root>/<runId>/``::

    state.json        the run's only mutable file (``store.state``)
    state.json.lock   the fcntl lock of its writers
    events.jsonl      the append-only event log (``store.events``)
    driver.lock       held by the run's driver while it runs
    approved-run.json a backlog run's copy of its approved run boundary
    git-filters.json  the repository's content filters when the run first started
                      (``workspace.filters``), trusted again on a relaunch
    launch.json       what the run was armed with, when its ``armed`` event cannot
                      hold it (``store.launch_record``)
    item-marks/       a backlog run's work tree marks of the items it works on
                      (``loop.backlog_marks``)
    iter-NNNN/        one folder per attempt at an iteration (a retry of the same
                      iteration gets iter-NNNN.2, …): prompt.md, stdout.log, stderr.log

No other module spells these names (they are kept in ``store.run_files``).
"""

from __future__ import annotations

from pathlib import Path

from msgspec import Struct

from autopilot.store.private import make_private_dir
from autopilot.store.run_files import (
    APPROVED_RUN_COPY,
    ATTEMPT_PREFIX,
    DRIVER_LOCK_FILE,
    EVENTS_FILE,
    GIT_FILTERS_FILE,
    ITEM_MARKS_DIR,
    LAUNCH_FILE,
    PROMPT_FILE,
    STATE_FILE,
    STDERR_FILE,
    STDOUT_FILE,
    WORK_ITEM_FILE,
    has_records,
)

__all__ = [
    "APPROVED_RUN_COPY",
    "ATTEMPT_PREFIX",
    "DRIVER_LOCK_FILE",
    "EVENTS_FILE",
    "GIT_FILTERS_FILE",
    "ITEM_MARKS_DIR",
    "LAUNCH_FILE",
    "PROMPT_FILE",
    "STATE_FILE",
    "STDERR_FILE",
    "STDOUT_FILE",
    "WORK_ITEM_FILE",
    "AttemptDir",
    "RunDir",
]


class AttemptDir(Struct, frozen=True):
    """The folder of one attempt at an iteration and its three files."""

    path: Path

    @property
    def prompt(self) -> Path:
        """The prompt sent to the agent."""
        return self.path / PROMPT_FILE

    @property
    def stdout(self) -> Path:
        """The agent's raw stdout."""
        return self.path / STDOUT_FILE

    @property
    def stderr(self) -> Path:
        """The agent's raw stderr."""
        return self.path / STDERR_FILE


class RunDir(Struct, frozen=True):
    """The paths of one run folder. Nothing is created or checked here.

    Attributes:
        path: ``<runs-root>/<runId>``.
    """

    path: Path

    @property
    def run_id(self) -> str:
        """The run id (the folder's name)."""
        return self.path.name

    @property
    def state(self) -> Path:
        """``state.json``."""
        return self.path / STATE_FILE

    @property
    def events(self) -> Path:
        """``events.jsonl``."""
        return self.path / EVENTS_FILE

    @property
    def approved_run(self) -> Path:
        """The copy of the project's ``approved-run.json`` autopilot last wrote."""
        return self.path / APPROVED_RUN_COPY

    @property
    def git_filters(self) -> Path:
        """The content filters trusted for the run's whole life (``workspace.filters``)."""
        return self.path / GIT_FILTERS_FILE

    @property
    def launch(self) -> Path:
        """``launch.json``: what the run was armed with (``store.launch_record``)."""
        return self.path / LAUNCH_FILE

    @property
    def item_marks(self) -> Path:
        """``item-marks/``: where the work tree stood when each work item started."""
        return self.path / ITEM_MARKS_DIR

    @property
    def driver_lock(self) -> Path:
        """``driver.lock``, held by the run's driver."""
        return self.path / DRIVER_LOCK_FILE

    def attempt(self, iteration: int, attempt: int = 1) -> AttemptDir:
        """The folder of ``attempt`` (1-based) at ``iteration``: ``iter-NNNN[.K]``."""
        name = f"{ATTEMPT_PREFIX}{iteration:04d}"
        return AttemptDir(self.path / (name if attempt <= 1 else f"{name}.{attempt}"))

    def new_attempt(self, iteration: int) -> AttemptDir:
        """Create the next free attempt folder of ``iteration`` (mode 0700).

        Raises:
            OSError: it cannot be created.
        """
        attempt = 1
        while True:
            folder = self.attempt(iteration, attempt)
            try:
                make_private_dir(folder.path)
            except FileExistsError:
                attempt += 1
                continue
            return folder

    def has_records(self) -> bool:
        """The folder holds a ``state.json`` or an ``events.jsonl`` (a run's records)."""
        return has_records(self.path)
