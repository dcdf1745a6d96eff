"""An armed run's ``state.json`` as the hook reads it (``hook.decide.RunRead``): the
state, or why there is none (its folder is gone, the file cannot be read).
"""

from __future__ import annotations

from pathlib import Path

from autopilot.errors import StateFileError
from autopilot.hook.decide import RunRead
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore


def read_run(root: Path, run_id: str) -> RunRead:
    """The ``state.json`` of run ``run_id`` under the runs root ``root``, or why it
    cannot be read."""
    if not (root / run_id).is_dir():
        return RunRead(None, gone=True, problem=f"the run's folder {root / run_id} is gone")
    try:
        return RunRead(StateStore(RunDir(root / run_id).state).read())
    except StateFileError as error:
        return RunRead(None, problem=str(error))
