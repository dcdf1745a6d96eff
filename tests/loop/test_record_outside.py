"""The driver's record of its run: a change to a field only the driver writes, made by
someone else (an agent editing ``state.json``), is reported once and put back, not
reported again at every read while the agent runs."""

from __future__ import annotations

import json
from pathlib import Path

from autopilot.loop.record import RunRecord
from autopilot.store.events import EventLog
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore
from tests.conftest import read_jsonl
from tests.fakes import FakeClock

RUN = "r-1796160786320"


def test_an_outside_change_is_reported_once_and_put_back(tmp_path: Path) -> None:
    folder = tmp_path / RUN
    folder.mkdir()
    store = StateStore(folder / "state.json")
    store.create(RunState(run_id=RUN, cwd=str(tmp_path)))
    record = RunRecord(store, EventLog(folder / "events.jsonl", RUN, FakeClock().now_ms))
    record.update(lambda s: setattr(s.spend, "iterations", 2))

    data = json.loads((folder / "state.json").read_text())
    data["spend"]["iterations"] = 0
    data["stopRequested"] = True  # a control field, written by `autopilot stop`
    (folder / "state.json").write_text(json.dumps(data))
    for _ in range(5):
        record.refresh()

    warnings = [e for e in read_jsonl(folder / "events.jsonl") if e["type"] == "warning"]
    assert [w["outsideChange"] for w in warnings] == [["spend"]]
    on_disk = store.read()
    assert on_disk.spend.iterations == 2 and record.state.spend.iterations == 2
    assert on_disk.stop_requested and record.state.stop_requested
