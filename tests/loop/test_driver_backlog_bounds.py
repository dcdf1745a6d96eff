"""Whatever an agent reports, its decision is applied and counted: long evidence is
cut at the point it enters, and an item record stays under its line cap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autopilot.store.backlog import MAX_ITEM_LINE_BYTES
from autopilot.store.event_format import MAX_EVENT_LINE_BYTES
from tests.loop.test_driver_backlog import _events, _item_of, agent, arm_backlog, at_first_gate

FAILING = [
    {
        "id": "it1",
        "prompt": "make it1 pass",
        "acceptance_criteria": [{"id": "ac1", "text": "never", "check": "false"}],
    },
    {"id": "it2", "prompt": "write it2.txt"},
]


@pytest.mark.parametrize("size", [13 * 1024, 60 * 1024])
def test_long_evidence_is_cut_and_every_attempt_counts(tmp_path: Path, size: int) -> None:
    """An item whose check fails, with 13 or 60 KB of evidence in every report: each
    attempt counts, the item is blocked after two, the next item starts, and no line of
    tasks.jsonl or the log is over its cap."""
    rig = arm_backlog(tmp_path, FAILING, max_iterations=4, max_item_attempts=2)
    asked = at_first_gate(rig, lambda s: setattr(s, "gate_answer", "try once more"))

    def long_report(item: str, attempt: int, cwd: Path) -> Any:
        (cwd / f"{item}-{attempt}.txt").write_text("touched\n")
        criteria = {"ac1": True} if item == "it1" else {}
        return "continue_next", criteria, ("é" * (size // 2), "x" * size)

    driver, runner = rig.driver([agent(rig, long_report)])
    result = driver.run()
    assert [_item_of(r) for r in runner.requests] == ["it1", "it1", "it2", "it1"]
    assert result.reason == "max_iterations"
    assert asked and asked[0].startswith("no work item can start: it1 is blocked: 2 attempts")
    events = _events(rig)
    notes = [e.get("note", "") for e in events if e["type"] == "warning"]
    assert not [n for n in notes if "KiB" in n or "not written" in n], notes
    starts = [(e["itemId"], e["attempt"]) for e in events if e["type"] == "workitem_start"]
    assert starts[:3] == [("it1", 1), ("it1", 2), ("it2", 1)]
    ends = [(e["itemId"], e["status"]) for e in events if e["type"] == "workitem_end"]
    assert ends[:3] == [("it1", "reopened"), ("it1", "blocked"), ("it2", "completed")]
    recorded = [e["item"] for e in events if e["type"] == "workitem_recorded"]
    assert any("[cut: " in " ".join(r["completion"]["evidence"]) for r in recorded)
    path = rig.root.parent / "work" / ".autopilot" / "tasks.jsonl"
    lines = path.read_bytes().splitlines()
    assert all(len(line) <= MAX_ITEM_LINE_BYTES for line in lines)
    it1 = json.loads(lines[0])
    assert any("[cut: " in e for e in it1["completion"]["evidence"])
    raw = (rig.folder / "events.jsonl").read_bytes().splitlines()
    assert all(len(line) <= MAX_EVENT_LINE_BYTES for line in raw)
