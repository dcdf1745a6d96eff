"""Reading a growing log: from the end, in one streaming fold, and as it grows."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autopilot.store.events import read_events
from autopilot.store.fold import fold
from autopilot.view.tail import (
    LogFollower,
    fold_log,
    log_end,
    parse_event_block,
    read_last_events,
    read_lines_backward,
)
from tests.view.runfiles import running_log


def _write(path: Path, events: list[dict[str, object]], tail: str = "") -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + tail)


_GOOD = [json.dumps(e) for e in running_log().events]
_ODD = [
    "",
    "   ",
    "not json",
    "[1, 2]",
    '{"type": "pause", "ts": "1", "runId": "r-1"}',
    '{"type": "pause", "ts": NaN, "runId": "r-1"}',
    '{"type": "usage_update", "ts": 5, "runId": "r-1", "costUsd": Infinity}',
    '{"type": "nope", "ts": 5, "runId": "r-1"}',
    '{"type": "pause", "ts": 5, "runId": "r-1"}, {"type": "resume", "ts": 6, "runId": "r-1"}',
    '{"type": "resume", "ts": 7, "runId": "r-1"}\r',
    '{"type": "pause", "ts": true, "runId": "r-1"}',
    '{"type": "pause", "ts": 8, "runId": ""}',
    '{"type": "stage_start", "ts": 9, "runId": "r-1", "stage": 1, "stageName": "É😀"}',
    '{"type": "pause", "ts": 10, "runId": "r-1"}{"x": 1}',
    "\x0c",
]


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(st.sampled_from(_GOOD + _ODD), max_size=60),
    tail=st.sampled_from(["", '{"type": "pause", "ts": 1', "garbage"]),
    chunk=st.sampled_from([7, 64, 1024, 1 << 20]),
)
def test_streaming_fold_equals_store_fold(
    tmp_path_factory: object, lines: list[str], tail: str, chunk: int
) -> None:
    """``fold_log`` gives exactly ``fold(read_events())``, whatever the lines, and
    ``read_last_events`` gives the same events' end."""
    folder = tmp_path_factory.mktemp("log")  # type: ignore[attr-defined]
    path = folder / "events.jsonl"
    path.write_bytes(("".join(line + "\n" for line in lines) + tail).encode())
    expected_events = list(read_events(path))
    snapshot, offset = fold_log(path, chunk_bytes=chunk)
    assert snapshot == fold(expected_events)
    assert offset == log_end(path).offset
    assert read_last_events(path, 5) == expected_events[-5:]
    assert parse_event_block(path.read_bytes()[: max(0, offset - 1)]) == expected_events


def test_fold_in_two_parts_equals_whole(tmp_path: Path) -> None:
    """A prefix folded, then the rest from its offset, equals the whole."""
    path = tmp_path / "events.jsonl"
    _write(path, running_log().events)
    middle = path.read_bytes().index(b"\n", path.stat().st_size // 2) + 1
    first, offset = fold_log(path, end=middle)
    assert offset == middle
    both, end = fold_log(path, start=offset, snapshot=first)
    assert both == fold(read_events(path)) and end == path.stat().st_size


def test_missing_log_is_empty(tmp_path: Path) -> None:
    """A log that does not exist yet reads as empty everywhere."""
    path = tmp_path / "events.jsonl"
    assert fold_log(path)[1] == 0
    assert read_last_events(path, 10) == []
    assert list(read_lines_backward(path)) == []
    assert log_end(path).offset == 0 and log_end(path).inode is None
    assert LogFollower(path).read_new().events == []


def test_backward_reading_crosses_blocks_and_skips_the_partial_line(tmp_path: Path) -> None:
    """Lines longer than a block come back whole; a last line without newline does not."""
    path = tmp_path / "log"
    path.write_bytes(b"first\n" + b"x" * 100 + b"\nthird\npartial")
    lines = list(read_lines_backward(path, block_bytes=8))
    assert lines == [b"third", b"x" * 100, b"first"]
    assert list(read_lines_backward(path, end=6, block_bytes=4)) == [b"first"]


def test_last_events_of_a_big_log_read_only_its_end(tmp_path: Path) -> None:
    """The timeline's first frame does not read the whole log."""
    path = tmp_path / "events.jsonl"
    events = [{"type": "pause", "ts": n, "runId": "r-1"} for n in range(20_000)]
    _write(path, events)
    got = read_last_events(path, 3)
    assert [e["ts"] for e in got] == [19_997, 19_998, 19_999]


def test_follower_holds_back_a_torn_line(tmp_path: Path) -> None:
    """An append in progress is read only once its newline has arrived."""
    path = tmp_path / "events.jsonl"
    follower = LogFollower(path)
    assert follower.read_new().events == []
    line = json.dumps({"type": "pause", "ts": 1, "runId": "r-1"}) + "\n"
    path.write_text(line[:10])
    assert follower.read_new().events == [] and follower.offset == 0
    assert follower.has_more()
    with path.open("a") as handle:
        handle.write(line[10:])
    assert [e["type"] for e in follower.read_new().events] == ["pause"]
    assert follower.read_new().events == [] and not follower.has_more()


def test_follower_reports_truncation_and_replacement(tmp_path: Path) -> None:
    """A log that shrinks or is replaced by another file is reported as reset."""
    path = tmp_path / "events.jsonl"
    _write(path, [{"type": "pause", "ts": n, "runId": "r-1"} for n in range(3)])
    follower = LogFollower(path)
    assert len(follower.read_new().events) == 3
    path.write_text("")
    assert follower.read_new().reset
    _write(path, [{"type": "resume", "ts": 9, "runId": "r-1"}])
    assert [e["type"] for e in follower.read_new().events] == ["resume"]
    other = tmp_path / "other"
    _write(other, [{"type": "pause", "ts": 1, "runId": "r-1"}] * 5)
    os.replace(other, path)
    assert follower.read_new().reset
    assert len(follower.read_new().events) == 5
    path.unlink()
    assert follower.read_new().reset


def test_follower_catches_up_in_bounded_reads(tmp_path: Path) -> None:
    """``max_bytes`` bounds one read; the rest comes on the next."""
    path = tmp_path / "events.jsonl"
    _write(path, [{"type": "pause", "ts": n, "runId": "r-1"} for n in range(100)])
    follower = LogFollower(path)
    seen = []
    while True:
        events = follower.read_new(max_bytes=500).events
        if not events:
            break
        seen.extend(e["ts"] for e in events)
    assert seen == list(range(100))
