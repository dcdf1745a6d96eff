"""An armed run's ``state.json`` as the hook reads it: the state, or why there is none
(its folder is gone, the file cannot be read).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autopilot.errors import StateFileError
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore


@dataclass(frozen=True)
class RunRead:
    """The run's ``state.json`` as a Stop read it.

    Attributes:
        state: The run's state; None when it cannot be read.
        gone: The run's folder is gone (``state`` is None).
        problem: Why ``state`` is None, in words.
    """

    state: RunState | None
    gone: bool = False
    problem: str | None = None

    @property
    def armed_no_more(self) -> bool:
        """The run has ended or its folder is gone: its arming can be dropped."""
        return self.gone or (self.state is not None and self.state.terminated)


def read_run(root: Path, run_id: str) -> RunRead:
    """The run's ``state.json``, or why it cannot be read."""
    if not (root / run_id).is_dir():
        return RunRead(None, gone=True, problem=f"the run's folder {root / run_id} is gone")
    try:
        return RunRead(StateStore(RunDir(root / run_id).state).read())
    except StateFileError as error:
        return RunRead(None, problem=str(error))
