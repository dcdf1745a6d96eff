"""A log deleted, replaced or cut short behind its writer's back is said so in it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from autopilot.store.events import EventLog, read_events

RUN = "run-1"


def _delete(path: Path) -> None:
    path.unlink()


def _replace(path: Path) -> None:
    forged = path.with_name("forged")
    forged.write_text('{"type":"armed","ts":1,"runId":"run-1"}\n')
    os.replace(forged, path)


def _cut(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.truncate(10)


@pytest.mark.parametrize(
    ("change", "how"),
    [(_delete, "was deleted"), (_replace, "was replaced"), (_cut, "was cut short (10 bytes")],
)
def test_the_next_append_after_a_change_says_so_first(
    tmp_path: Path, change: Callable[[Path], None], how: str
) -> None:
    path = tmp_path / "events.jsonl"
    clock = iter(range(1, 100))
    log = EventLog(path, RUN, lambda: next(clock))
    log.emit("iteration_start", iteration=1)
    log.emit("iteration_end", iteration=1)
    change(path)
    written = log.emit("iteration_start", iteration=2)
    assert written == {"type": "iteration_start", "ts": 3, "runId": RUN, "iteration": 2}
    events = list(read_events(path))
    warning, last = events[-2:]
    assert warning["type"] == "warning" and how in warning["note"], warning
    assert last == written
    log.emit("iteration_end", iteration=2)  # said once
    assert [e["type"] for e in read_events(path)].count("warning") == 1


def test_appends_by_others_and_a_closed_log_reopened_are_no_change(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path, RUN, lambda: 1)
    log.emit("iteration_start", iteration=1)
    log.close()
    other = EventLog(path, RUN, lambda: 2)
    other.emit("pause")
    other.close()
    log.emit("iteration_end", iteration=1)
    assert [e["type"] for e in read_events(path)] == ["iteration_start", "pause", "iteration_end"]
