"""A driver that starts a new run (no driver before it, its log only the ``armed``
event) does not read the log for a relaunch's repairs; any sign of an earlier driver,
an ending or a torn line, and it does (``recovery.is_new_run``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autopilot.config import RunConfig
from autopilot.errors import UsageError
from autopilot.loop.recovery import is_new_run, reconcile_terminal
from autopilot.store import reader
from autopilot.store.event_stream import PLAIN_LOG_BYTES, read_events
from autopilot.store.events import EventLog
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore, read_state
from tests.fakes import arm
from tests.loop.test_driver import _of, working


def _folder(tmp_path: Path) -> RunDir:
    return RunDir(arm(tmp_path, RunConfig(max_iterations=1)).folder)


def test_an_armed_run_is_new(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    assert is_new_run(folder, read_state(folder.state))


def test_a_log_with_more_than_its_armed_event_is_not_a_new_runs(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    state = read_state(folder.state)
    log = EventLog(folder.events, state.run_id, lambda: 1)
    log.emit("abort", reason="user_stopped")  # a stop logged, its state write lost
    assert not is_new_run(folder, state)


def test_a_torn_line_or_a_driver_in_the_state_is_not_a_new_run(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    state = read_state(folder.state)
    with folder.events.open("ab") as handle:
        handle.write(b'{"type":"driver_st')
    assert not is_new_run(folder, state)
    folder.events.write_bytes(folder.events.read_bytes().rsplit(b"\n", 1)[0] + b"\n")
    assert is_new_run(folder, state)
    state.pid = 12345
    assert not is_new_run(folder, state)
    state.pid, state.spend.iterations = None, 1
    assert not is_new_run(folder, state)


def test_an_ending_in_the_state_alone_is_still_logged(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    store = StateStore(folder.state)
    state = store.update(lambda s: setattr(s, "terminated", True))
    assert not is_new_run(folder, state)
    log = EventLog(folder.events, state.run_id, lambda: 1)
    reconcile_terminal(folder, store, log)
    assert [e["type"] for e in read_events(folder.events)][-1] == "abort"


def test_only_a_relaunch_reads_the_log_for_its_repairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    folded: list[Path] = []

    def read_snapshot(path: Path) -> Any:
        folded.append(path)
        return real(path)

    real = reader.read_snapshot
    monkeypatch.setattr(reader, "read_snapshot", read_snapshot)
    driver, _ = rig.driver([working(rig)])
    assert driver.run().reason == "max_iterations"
    assert folded == []
    assert len(_of(rig, "iteration_end")) == 2
    # A relaunch (a driver ran the run before) reconciles the records and the spend.
    store = StateStore(rig.folder / "state.json")
    store.update(lambda s: setattr(s, "terminated", False))
    with pytest.raises(UsageError):
        rig.driver([working(rig)])[0].run()
    assert folded


def test_a_short_log_reads_as_a_long_one(tmp_path: Path) -> None:
    """Below ``PLAIN_LOG_BYTES`` a log is decoded with json, above it through msgspec:
    the same events, bad lines skipped the same way."""
    lines = [
        b'{"type":"armed","ts":1,"runId":"r"}',
        b'{"type":"warning","ts":2,"runId":"r","note":"\\ud800"}',
        b'{"type":"warning","ts":NaN,"runId":"r"}',
        b'{"type":"no_such_type","ts":3,"runId":"r"}',
        b"[1, 2]",
        b'{"type":"iteration_start","ts":4,"runId":"r","iteration":1} ',
        b'{"type":"warning","ts":5,"runId":"","note":"x"}',
        b'{"type":"warning","ts":1e400,"runId":"r"}',
    ]
    short, long = tmp_path / "short.jsonl", tmp_path / "long.jsonl"
    short.write_bytes(b"\n".join(lines) + b"\n")
    filler = json.dumps({"type": "warning", "ts": 9, "runId": "r", "note": "x" * 1000}).encode()
    pad = [filler] * (PLAIN_LOG_BYTES // len(filler) + 1)
    long.write_bytes(b"\n".join([*pad, *lines]) + b"\n")
    assert short.stat().st_size <= PLAIN_LOG_BYTES < long.stat().st_size
    from_short = list(read_events(short))
    assert [e["ts"] for e in from_short] == [1, 2, 4]
    assert list(read_events(long))[len(pad) :] == from_short
