"""An event line nested too deeply for the decoders is a bad line, skipped like any
other: it never stops a reader (``replay``, ``doctor --repair``) with an internal
RecursionError."""

from __future__ import annotations

from pathlib import Path

from autopilot.store.events import read_events
from autopilot.store.records import decode_event_line, decode_record

_DEPTH = 300_000


def _deep_line() -> bytes:
    nested = "[" * _DEPTH + "]" * _DEPTH
    return ('{"type":"pause","ts":1,"runId":"r-1","x":' + nested + "}\n").encode()


def test_a_line_nested_beyond_the_decoders_is_skipped_by_each_of_them() -> None:
    line = _deep_line()
    assert decode_event_line(line) is None
    assert decode_record(line) is None


def test_a_log_with_a_line_nested_beyond_the_decoders_reads_its_other_events(
    tmp_path: Path,
) -> None:
    log = tmp_path / "events.jsonl"
    good = b'{"type":"pause","ts":2,"runId":"r-1"}\n'
    log.write_bytes(good + _deep_line() + good)
    assert [event["ts"] for event in read_events(log)] == [2, 2]
