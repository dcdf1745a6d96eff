"""The msgspec reader decides every line as the seed reader does, and folds the same."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autopilot.store.events import EVENT_TYPES, parse_event_line
from autopilot.store.fold import Snapshot, fold, fold_lines
from autopilot.store.reader import fold_log, read_snapshot
from autopilot.store.records import decode_event_line, decode_record

_ODD_LINES = [
    b"",
    b"   ",
    b"[1, 2]",
    b'"text"',
    b"{not json",
    b'{"type":"armed","ts":1,"runId":"r"} trailing',
    b'{"type":"armed","ts":NaN,"runId":"r"}',
    b'{"type":"armed","ts":Infinity,"runId":"r"}',
    b'{"type":"armed","ts":1e400,"runId":"r"}',
    b'{"type":"armed","ts":' + b"9" * 400 + b',"runId":"r"}',
    b'{"type":"armed","ts":true,"runId":"r"}',
    b'{"type":"armed","ts":"1","runId":"r"}',
    b'{"type":"armed","ts":1,"runId":""}',
    b'{"type":"armed","ts":1,"runId":7}',
    b'{"type":"armed","ts":1}',
    b'{"type":"unknown_type","ts":1,"runId":"r"}',
    b'{"type":"armed","ts":1,"runId":"r","label":"\\ud800"}',
    b'{"type":"armed","ts":1,"runId":"r","label":"caf\xc3\xa9"}',
    b'{"type":"armed","ts":1,"runId":"r","label":"\xff"}',
    b'{"type":"armed","type":"abort","ts":1,"runId":"r","reason":"x"}',
    b'\x0b{"type":"armed","ts":1,"runId":"r"}\x0c',
    b' {"type":"armed","ts":1.5,"runId":"r"}\r',
    b'{"type":"iteration_start","ts":2,"runId":"r","iteration":1e400}',
    b'{"type":"iteration_start","ts":2,"runId":"r","iteration":' + b"9" * 400 + b"}",
    b'{"type":"iteration_end","ts":3,"runId":"r","iteration":"1","tokens":[1],"costUsd":-1}',
]

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
_fields = st.dictionaries(
    st.sampled_from(
        [
            "iteration",
            "excerpt",
            "tokens",
            "costUsd",
            "stage",
            "stageName",
            "sub",
            "outcome",
            "label",
            "reason",
            "note",
            "itemId",
            "title",
            "items",
            "streak",
        ]
    ),
    _json_values,
    max_size=5,
)


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        return draw(st.sampled_from(_ODD_LINES))
    event = {
        "type": draw(st.sampled_from([*EVENT_TYPES[:30], "unknown"])),
        "ts": draw(st.integers(0, 2**60) | st.floats(allow_nan=False) | st.just(True)),
        "runId": draw(st.sampled_from(["r", "", 5])),
        **draw(_fields),
    }
    return json.dumps(event, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=_lines())
def test_a_line_is_decided_as_the_seed_reader_decides_it(line: bytes) -> None:
    assert decode_event_line(line) == parse_event_line(line)
    assert (decode_record(line) is None) == (parse_event_line(line) is None)


def test_the_odd_lines_are_decided_as_the_seed_reader_decides_them() -> None:
    for line in _ODD_LINES:
        assert decode_event_line(line) == parse_event_line(line), line
        assert (decode_record(line) is None) == (parse_event_line(line) is None), line


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_lines(), max_size=12))
def test_folding_lines_gives_the_snapshot_of_their_events(lines: list[bytes]) -> None:
    events = [e for e in map(parse_event_line, lines) if e is not None]
    snap = Snapshot()
    fold_lines(snap, lines)
    assert snap == fold(events)


def test_a_huge_integer_is_not_a_finite_timestamp(tmp_path: Path) -> None:
    """JavaScript reads a 400-digit number as Infinity: the line is skipped, not a crash."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(
        b'{"type":"armed","ts":1,"runId":"r","label":"ok"}\n'
        b'{"type":"iteration_start","ts":' + b"9" * 400 + b',"runId":"r","iteration":1}\n'
        b'{"type":"iteration_start","ts":5,"runId":"r","iteration":' + b"9" * 400 + b"}\n"
    )
    snap = read_snapshot(path)
    assert snap.label == "ok" and snap.updatedAt == 5 and snap.iteration == 0


def test_a_line_over_the_read_cap_is_skipped_by_the_streaming_fold(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    big = json.dumps({"type": "armed", "ts": 2, "runId": "r", "label": "x" * (2 << 20)})
    path.write_text(
        '{"type":"armed","ts":1,"runId":"r","label":"small"}\n'
        + big
        + '\n{"type":"iteration_start","ts":3,"runId":"r","iteration":1}\n'
    )
    snap, offset = fold_log(path, chunk_bytes=64 * 1024)
    assert snap.label == "small" and snap.iteration == 1
    assert offset == path.stat().st_size


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_lines(), max_size=12), chunk=st.sampled_from([7, 64, 64 * 1024]))
def test_a_short_log_read_without_msgspec_folds_and_yields_the_same(
    lines: list[bytes], chunk: int
) -> None:
    """A process that has not loaded msgspec reads a short log with the seed reader's
    own parser: the same snapshot, offset and events as msgspec's reading."""
    from unittest import mock

    from autopilot.store import reader

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "events.jsonl"
        path.write_bytes(b"".join(line.replace(b"\n", b" ") + b"\n" for line in lines) + b"{")
        read: dict[bool, tuple[Snapshot, int, list[Any], Snapshot]] = {}
        for loaded in (True, False):
            with mock.patch.object(reader, "_msgspec_loaded", lambda loaded=loaded: loaded):
                events: list[Any] = []
                snap, offset = fold_log(path, on_event=events.append, chunk_bytes=chunk)
                read[loaded] = (snap, offset, events, fold_log(path, chunk_bytes=chunk)[0])
        assert read[False] == read[True]
        assert read[False][0] == read[False][3]
        assert read[False][1] == path.stat().st_size - 1


def test_a_long_log_is_read_with_msgspec(tmp_path: Path, monkeypatch: Any) -> None:
    """Past ``PLAIN_READ_BYTES`` the fold decodes with msgspec (the check can fail:
    the seed's parser is not called)."""
    from autopilot.store import reader

    path = tmp_path / "events.jsonl"
    line = b'{"type":"iteration_start","ts":2,"runId":"r","iteration":1}\n'
    path.write_bytes(line * 4)
    seen: list[bytes] = []

    def parse(raw: bytes) -> Any:
        seen.append(raw)
        return parse_event_line(raw)

    monkeypatch.setattr(reader, "parse_event_line", parse)
    monkeypatch.setattr(reader, "_msgspec_loaded", lambda: False)
    assert fold_log(path, on_event=lambda _: None)[0].iteration == 1
    assert len(seen) == 4
    seen.clear()
    monkeypatch.setattr(reader, "PLAIN_READ_BYTES", len(line))
    assert fold_log(path, on_event=lambda _: None)[0].iteration == 1
    assert seen == []
