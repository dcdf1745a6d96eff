"""A full disk under a hook run, through the state store's writer (ENOSPC) as the
driver's full-disk tests do: whatever Stop the disk refuses, one iteration has one
``iteration_end`` and the run one terminal event."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest

from autopilot.core.vocabulary import HookAgent
from autopilot.errors import StateFileError
from autopilot.hook.stop import answer_stop
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore
from tests.conftest import assert_one_end_per_attempt
from tests.fakes import FakeClock
from tests.hook.sessions import Session, armed_session, blocks, events_of, kinds_of, state_of


class FullDisk(StateStore):
    """A ``state.json`` whose every write the disk refuses (ENOSPC)."""

    def _write(self, state: RunState, **options: Any) -> None:
        raise StateFileError(
            f"cannot write {self.path}: No space left on device", errno=errno.ENOSPC
        )


def _full_stop(session: Session, clock: FakeClock, last: str) -> None:
    """A Stop of ``session`` on the full disk: its state write fails."""
    data = {
        "session_id": session.session_id,
        "transcript_path": str(session.transcript),
        "cwd": str(session.project),
        "hook_event_name": "Stop",
        "stop_hook_active": True,
        "last_assistant_message": last,
    }
    with pytest.raises(StateFileError, match="No space left on device"):
        answer_stop(
            HookAgent.CLAUDE,
            json.dumps(data).encode(),
            clock=clock,
            environ={},
            state_store=FullDisk,
        )


def test_stops_on_a_full_disk_end_an_iteration_once(tmp_path: Path, project: Path) -> None:
    clock, run_id, session = armed_session(tmp_path, project)
    blocks(session.stop(clock, last="armed"))
    session.say("working")
    for _ in range(3):
        _full_stop(session, clock, "working")
    assert kinds_of(run_id, "iteration_start", "iteration_end") == [
        ("iteration_start", 1),
        ("iteration_end", 1),
    ]
    assert (
        "iteration 2"
        in json.loads(session.stop(clock, active=True, last="working"))["systemMessage"]
    )
    session.say("done. COMPLETE")
    for _ in range(2):  # the first logs iteration 2's end and the run's, and writes neither
        _full_stop(session, clock, "done. COMPLETE")
    ended = json.loads(session.stop(clock, active=True, last="done. COMPLETE"))
    assert ended["systemMessage"].endswith("ended: completed (completion_promise)")
    events = events_of(run_id)
    assert_one_end_per_attempt(events)
    assert [(e["type"], e.get("iteration")) for e in events if "iteration_" in e["type"]] == [
        ("iteration_start", 1),
        ("iteration_end", 1),
        ("iteration_start", 2),
        ("iteration_end", 2),
    ]
    assert [e["type"] for e in events].count("complete") == 1
    state = state_of(run_id)
    assert (state["terminated"], state["spend"]["iterations"]) == (True, 2)


def test_a_stop_that_could_not_record_the_runs_end_ends_it_once(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = armed_session(tmp_path, project, **{"max-iterations": "1"})
    blocks(session.stop(clock, last="armed"))
    session.say("working")
    _full_stop(session, clock, "working")  # iteration 1 ends the run: logged, not written
    assert session.stop(clock, active=True, last="working") != ""
    assert session.stop(clock, active=True, last="working") == ""
    events = events_of(run_id)
    assert [e["type"] for e in events].count("iteration_end") == 1
    assert [e["type"] for e in events if e["type"] in ("abort", "complete")] == ["abort"]
    assert state_of(run_id)["terminationReason"] == "max_iterations"
