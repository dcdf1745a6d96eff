"""A step that only goes on is written with the opening of the next attempt: one
``state.json`` write per iteration of a plain run (``RunRecord.apply``, ``hold``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autopilot.config import RunConfig
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore, read_state
from tests.fakes import arm
from tests.loop.test_driver import _of, working


class CountingStore(StateStore):
    """``state.json``, counting its writes and recording what each one held."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.written: list[tuple[int, bool]] = []  # (iterations spent, attempt open)

    def update(self, change: Any, **kwargs: Any) -> RunState:
        state = super().update(change, **kwargs)
        self.written.append((state.spend.iterations, state.iteration_open))
        return state


def _writes(tmp_path: Path, iterations: int) -> list[tuple[int, bool]]:
    rig = arm(tmp_path / str(iterations), RunConfig(max_iterations=iterations))
    store = CountingStore(rig.folder / "state.json")
    driver, _ = rig.driver([working(rig)], store=store)
    assert driver.run().reason == "max_iterations"
    state = read_state(rig.folder / "state.json")
    assert (state.spend.iterations, state.iteration_open) == (iterations, False)
    assert len(_of(rig, "decision_applied")) == iterations
    return store.written


def test_an_iteration_that_goes_on_writes_the_state_once(tmp_path: Path) -> None:
    (tmp_path / "3").mkdir()
    (tmp_path / "6").mkdir()
    three, six = _writes(tmp_path, 3), _writes(tmp_path, 6)
    assert len(six) - len(three) == 3
    # Each step before the last reaches state.json in the write that opens the next.
    opened = [spent for spent, open_ in six if open_]
    assert opened == [0, 1, 2, 3, 4, 5]
