"""The event log's line format, reader and writer (``docs/formats.md``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autopilot.store.events import (
    EVENT_TYPES,
    MAX_EVENT_LINE_BYTES,
    MAX_EXCERPT_UTF16_UNITS,
    MAX_READ_LINE_BYTES,
    SEED_EVENT_TYPES,
    TERMINAL_EVENT_TYPES,
    EventLog,
    EventType,
    excerpt,
    parse_event_line,
    read_events,
    serialize_event,
    utf16_units,
)

# The Node tool's EVENT_TYPES, in its order (``docs/formats.md``, "Vocabulary").
SEED_TYPES = [
    "armed",
    "iteration_start",
    "iteration_end",
    "pause",
    "resume",
    "stagnation",
    "complete",
    "abort",
    "stage_start",
    "stage_end",
    "substage",
    "backlog_snapshot",
    "workitem_start",
    "workitem_end",
    "stage_plan",
    "stage_plan_amend",
    "task_list",
    "task_start",
    "task_end",
    "commit_observed",
    "usage_update",
    "session_attached",
    "worktree_created",
    "worktree_removed",
    "worktree_kept",
]

# autopilot's own types as first released; later types may only be appended after them.
OUR_TYPES_V1 = [
    "message_queued",
    "message_delivered",
    "rate_limited",
    "checkpoint",
    "decision_applied",
    "supervisor_restart",
    "supervisor_giveup",
    "gate",
    "agent_error",
    "driver_start",
    "warning",
]

EMOJI = "\U0001f600"  # one astral character: two UTF-16 code units
RUN = "ralph-tui-prompt-1700000000000"


def line_of(**fields: object) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode()


# --- EVENT_TYPES ----------------------------------------------------------------------------


def test_event_types_start_with_the_seed_types_in_seed_order() -> None:
    assert list(EVENT_TYPES[:25]) == SEED_TYPES
    assert frozenset(SEED_TYPES) == SEED_EVENT_TYPES


def test_event_types_only_grow_by_appending() -> None:
    known = SEED_TYPES + OUR_TYPES_V1
    assert list(EVENT_TYPES[: len(known)]) == known
    assert len(set(EVENT_TYPES)) == len(EVENT_TYPES)
    assert [t.value for t in EventType] == list(EVENT_TYPES)


def test_terminal_types_are_complete_and_abort() -> None:
    assert frozenset({"complete", "abort"}) == TERMINAL_EVENT_TYPES


# --- excerpt --------------------------------------------------------------------------------


def test_utf16_units_counts_astral_characters_twice() -> None:
    assert utf16_units("") == 0
    assert utf16_units("abc") == 3
    assert utf16_units("é中") == 2
    assert utf16_units(EMOJI) == 2
    assert utf16_units("a" + EMOJI + "b") == 4


def test_excerpt_cuts_ascii_at_500() -> None:
    assert MAX_EXCERPT_UTF16_UNITS == 500
    assert excerpt("x" * 600) == "x" * 500
    assert excerpt("x" * 500) == "x" * 500
    assert excerpt("short") == "short"


def test_excerpt_counts_bmp_characters_once() -> None:
    assert excerpt("中" * 600) == "中" * 500


def test_excerpt_drops_an_emoji_that_would_straddle_the_limit() -> None:
    assert excerpt("a" * 499 + EMOJI) == "a" * 499
    assert excerpt("a" * 499 + EMOJI + "b") == "a" * 499


def test_excerpt_keeps_an_emoji_that_ends_exactly_at_the_limit() -> None:
    assert excerpt("a" * 498 + EMOJI + "b") == "a" * 498 + EMOJI


def test_excerpt_of_all_emoji_keeps_250() -> None:
    assert excerpt(EMOJI * 250) == EMOJI * 250
    assert excerpt(EMOJI * 251) == EMOJI * 250


def test_excerpt_takes_a_custom_limit() -> None:
    assert excerpt("abcdef", 3) == "abc"
    assert excerpt("ab" + EMOJI, 3) == "ab"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\ud800b", "a\ufffdb"),
        ("a\udc00b", "a\ufffdb"),
        ("\udcff" * 3, "\ufffd" * 3),
    ],
)
def test_excerpt_repairs_lone_surrogates_with_the_replacement_character(
    text: str, expected: str
) -> None:
    assert excerpt(text) == expected
    expected.encode("utf-8")


def test_excerpt_repairs_a_lone_surrogate_in_a_long_text() -> None:
    text = "a" * 300 + "\ud800" + "b" * 300
    assert excerpt(text) == "a" * 300 + "\ufffd" + "b" * 199


@settings(deadline=None)  # a loaded machine is slow; the property is what counts
@given(st.text(max_size=700))
def test_excerpt_property_is_a_maximal_prefix_within_the_cap(text: str) -> None:
    result = excerpt(text)
    assert text.startswith(result)
    assert utf16_units(result) <= 500
    result.encode("utf-8")
    if result != text:
        # Nothing more would have fit.
        assert utf16_units(result) + utf16_units(text[len(result)]) > 500


_WITH_SURROGATES = st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr))


@given(st.text(alphabet=_WITH_SURROGATES, max_size=700))
def test_excerpt_property_with_surrogates_is_an_encodable_repaired_prefix(text: str) -> None:
    result = excerpt(text)
    assert utf16_units(result) <= 500
    result.encode("utf-8")
    assert len(result) <= len(text)
    for got, original in zip(result, text, strict=False):
        if 0xD800 <= ord(original) <= 0xDFFF:
            assert got == "\ufffd"
        else:
            assert got == original


# --- serialize_event ------------------------------------------------------------------------


def test_serialize_writes_compact_json_without_ascii_escapes() -> None:
    line = serialize_event({"type": "armed", "ts": 1, "runId": RUN, "label": "é中" + EMOJI})
    assert line == f'{{"type":"armed","ts":1,"runId":"{RUN}","label":"é中{EMOJI}"}}'.encode()
    assert b"\n" not in line


def test_serialize_does_not_change_the_event_it_is_given() -> None:
    event = {"type": "iteration_end", "ts": 5, "runId": RUN, "excerpt": "x" * 900}
    serialize_event(event)
    assert event["excerpt"] == "x" * 900


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_serialize_refuses_nan_and_infinity(bad: float) -> None:
    with pytest.raises(ValueError):
        serialize_event({"type": "usage_update", "ts": 1, "runId": RUN, "costUsd": bad})
    with pytest.raises(ValueError):
        serialize_event({"type": "usage_update", "ts": 1, "runId": RUN, "tokens": {"input": bad}})


@pytest.mark.parametrize(
    "event",
    [
        {"ts": 1, "runId": RUN},
        {"type": "armed", "runId": RUN},
        {"type": "armed", "ts": 1},
        {"type": "armed", "ts": 1, "runId": ""},
        {"type": "armed", "ts": "1", "runId": RUN},
        {"type": "armed", "ts": 1.5, "runId": RUN},
        {"type": "armed", "ts": True, "runId": RUN},
        {"type": 3, "ts": 1, "runId": RUN},
    ],
)
def test_serialize_refuses_events_without_type_int_ts_and_run_id(event: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        serialize_event(event)


def test_serialize_refuses_values_json_cannot_hold_with_value_error() -> None:
    with pytest.raises(ValueError):
        serialize_event({"type": "armed", "ts": 1, "runId": RUN, "extra": {1, 2}})


@pytest.mark.parametrize("field", ["excerpt", "note", "reason", "argsSummary", "desc"])
def test_serialize_caps_text_fields_at_500_units(field: str) -> None:
    line = serialize_event({"type": "abort", "ts": 1, "runId": RUN, field: "a" * 499 + EMOJI * 5})
    assert line is not None
    assert json.loads(line)[field] == "a" * 499


def test_serialize_keeps_short_capped_fields_unchanged() -> None:
    line = serialize_event({"type": "abort", "ts": 1, "runId": RUN, "reason": "max_iterations"})
    assert line is not None
    assert json.loads(line)["reason"] == "max_iterations"


def test_serialize_repairs_lone_surrogates_anywhere_so_the_line_is_utf8() -> None:
    line = serialize_event({"type": "commit_observed", "ts": 1, "runId": RUN, "subject": "x\ud800"})
    assert line is not None
    assert json.loads(line.decode("utf-8"))["subject"] == "x\ufffd"


def _padding_for(total_bytes: int, **fields: object) -> str:
    """A ``blob`` value that makes the event's line exactly ``total_bytes`` long."""
    base = serialize_event({"type": "iteration_end", "ts": 1, "runId": RUN, "blob": "", **fields})
    assert base is not None
    return "z" * (total_bytes - len(base))


def test_serialize_accepts_a_line_of_exactly_16_kib() -> None:
    assert MAX_EVENT_LINE_BYTES == 16 * 1024
    blob = _padding_for(MAX_EVENT_LINE_BYTES, excerpt="e" * 500, note="n" * 500)
    line = serialize_event(
        {
            "type": "iteration_end",
            "ts": 1,
            "runId": RUN,
            "blob": blob,
            "excerpt": "e" * 500,
            "note": "n" * 500,
        }
    )
    assert line is not None
    assert len(line) == MAX_EVENT_LINE_BYTES
    assert json.loads(line)["excerpt"] == "e" * 500


def test_serialize_drops_excerpt_and_note_to_fit() -> None:
    blob = _padding_for(MAX_EVENT_LINE_BYTES + 1, excerpt="e" * 500, note="n" * 500)
    event = {
        "type": "iteration_end",
        "ts": 1,
        "runId": RUN,
        "iteration": 3,
        "blob": blob,
        "excerpt": "e" * 500,
        "note": "n" * 500,
    }
    line = serialize_event(event)
    assert line is not None
    assert len(line) <= MAX_EVENT_LINE_BYTES
    written = json.loads(line)
    assert "excerpt" not in written
    assert "note" not in written
    assert written["iteration"] == 3
    assert written["blob"] == blob


def test_serialize_returns_none_when_the_line_cannot_fit() -> None:
    blob = _padding_for(MAX_EVENT_LINE_BYTES + 1)
    assert serialize_event({"type": "iteration_end", "ts": 1, "runId": RUN, "blob": blob}) is None
    assert (
        serialize_event(
            {"type": "iteration_end", "ts": 1, "runId": RUN, "blob": blob, "excerpt": "short"}
        )
        is None
    )


def test_serialize_measures_the_limit_in_utf8_bytes() -> None:
    # 6000 three-byte characters: 18000 bytes but only 6000 characters.
    event = {"type": "task_list", "ts": 1, "runId": RUN, "stage": "S", "items": ["中" * 6000]}
    assert serialize_event(event) is None


# --- parse_event_line -----------------------------------------------------------------------


@pytest.mark.parametrize("event_type", SEED_TYPES + OUR_TYPES_V1)
def test_parse_accepts_every_known_type(event_type: str) -> None:
    assert parse_event_line(line_of(type=event_type, ts=1, runId=RUN)) == {
        "type": event_type,
        "ts": 1,
        "runId": RUN,
    }


def test_parse_returns_the_object_unchanged_with_extra_keys() -> None:
    obj = {
        "type": "armed",
        "ts": 1700000000000,
        "runId": RUN,
        "startedAt": "not checked",
        "mode": "prompt",
        "nested": {"a": [1, None, True]},
    }
    assert parse_event_line(json.dumps(obj)) == obj


@pytest.mark.parametrize(
    "raw",
    [
        b'{"type":"pause","ts":7,"runId":"r"}\r\n',
        b'{"type":"pause","ts":7,"runId":"r"}\r',
        b'  \t{"type":"pause","ts":7,"runId":"r"}  \n',
        '{"type":"pause","ts":7,"runId":"r"}\r\n',
    ],
)
def test_parse_tolerates_crlf_and_surrounding_whitespace(raw: bytes | str) -> None:
    assert parse_event_line(raw) == {"type": "pause", "ts": 7, "runId": "r"}


@pytest.mark.parametrize("ts", [0, -5, 1.5, 1e15, 1700000000000])
def test_parse_accepts_any_finite_number_ts(ts: float) -> None:
    event = parse_event_line(line_of(type="pause", ts=ts, runId="r"))
    assert event is not None
    assert event["ts"] == ts


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"   \r\n",
        b"{",
        b'{"type":"pause","ts":1,"runId":"r"',
        b"null",
        b"[]",
        b'[{"type":"pause","ts":1,"runId":"r"}]',
        b"5",
        b'"pause"',
        b"true",
        # ts
        b'{"type":"pause","runId":"r"}',
        b'{"type":"pause","ts":"1","runId":"r"}',
        b'{"type":"pause","ts":null,"runId":"r"}',
        b'{"type":"pause","ts":true,"runId":"r"}',
        b'{"type":"pause","ts":[1],"runId":"r"}',
        b'{"type":"pause","ts":1e400,"runId":"r"}',
        b'{"type":"pause","ts":NaN,"runId":"r"}',
        b'{"type":"pause","ts":Infinity,"runId":"r"}',
        b'{"type":"pause","ts":-Infinity,"runId":"r"}',
        # runId
        b'{"type":"pause","ts":1}',
        b'{"type":"pause","ts":1,"runId":""}',
        b'{"type":"pause","ts":1,"runId":5}',
        b'{"type":"pause","ts":1,"runId":null}',
        b'{"type":"pause","ts":1,"runId":["r"]}',
        # type
        b'{"ts":1,"runId":"r"}',
        b'{"type":"bogus","ts":1,"runId":"r"}',
        b'{"type":"PAUSE","ts":1,"runId":"r"}',
        b'{"type":5,"ts":1,"runId":"r"}',
        b'{"type":null,"ts":1,"runId":"r"}',
        # not JSON at all, or not UTF-8
        b"\xff\xfe{}",
        b'{"type":"pause","ts":1,"runId":"r\xff"}',
    ],
)
def test_parse_rejects_lines_the_seed_reader_rejects(raw: bytes) -> None:
    assert parse_event_line(raw) is None


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_parse_rejects_nan_and_infinity_anywhere_in_the_line(constant: str) -> None:
    # Not valid JSON, so the seed reader's JSON.parse throws on the whole line.
    raw = f'{{"type":"armed","ts":1,"runId":"r","maxIterations":{constant}}}'
    assert parse_event_line(raw) is None


def test_parse_rejects_deeply_nested_junk_without_raising() -> None:
    assert parse_event_line(b"[" * 100_000 + b"]" * 100_000) is None


def test_parse_reads_what_serialize_writes() -> None:
    event = {
        "type": "iteration_end",
        "ts": 1700000000123,
        "runId": RUN,
        "iteration": 2,
        "excerpt": "done " + EMOJI,
        "tokens": {"input": 0, "output": 1234},
    }
    line = serialize_event(event)
    assert line is not None
    assert parse_event_line(line) == event


# --- read_events ----------------------------------------------------------------------------


def test_read_events_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert list(read_events(tmp_path / "events.jsonl")) == []


def test_read_events_skips_malformed_lines_and_carries_on(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(
        b'{"type":"armed","ts":1,"runId":"r"}\n'
        b"not json\n"
        b"\n"
        b'{"type":"bogus","ts":2,"runId":"r"}\n'
        b'{"type":"pause","ts":"3","runId":"r"}\n'
        b"[1,2]\n"
        b'{"type":"iteration_start","ts":4,"runId":"r","iteration":1}\r\n'
        b'{"type":"pause","ts":5,"runId":"r"}\n'
    )
    assert [(e["type"], e["ts"]) for e in read_events(path)] == [
        ("armed", 1),
        ("iteration_start", 4),
        ("pause", 5),
    ]


def test_read_events_holds_back_a_final_line_without_newline(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"type":"armed","ts":1,"runId":"r"}\n{"type":"pause","ts":2,"runId":"r"}')
    assert [e["type"] for e in read_events(path)] == ["armed"]
    with path.open("ab") as handle:
        handle.write(b"\n")
    assert [e["type"] for e in read_events(path)] == ["armed", "pause"]


def test_read_events_holds_back_a_torn_final_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"type":"armed","ts":1,"runId":"r"}\n{"type":"pau')
    assert [e["type"] for e in read_events(path)] == ["armed"]


def test_read_events_reads_lines_across_read_chunks(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = [
        serialize_event(
            {"type": "usage_update", "ts": i, "runId": "r", "blob": chr(0x4E00 + i % 100) * 4000}
        )
        for i in range(300)
    ]
    path.write_bytes(b"".join(line + b"\n" for line in lines if line is not None))
    assert path.stat().st_size > 3 * 1024 * 1024
    assert [e["ts"] for e in read_events(path)] == list(range(300))


# --- EventLog -------------------------------------------------------------------------------


class FakeClock:
    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = start_ms

    def __call__(self) -> int:
        self.now_ms += 1
        return self.now_ms


def test_emit_appends_a_line_and_returns_the_event(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl", RUN, FakeClock(100))
    first = log.emit(EventType.ARMED, label="demo", maxIterations=3, minIterations=None)
    second = log.emit("iteration_start", iteration=1)
    log.close()
    assert first == {"type": "armed", "ts": 101, "runId": RUN, "label": "demo", "maxIterations": 3}
    assert second == {"type": "iteration_start", "ts": 102, "runId": RUN, "iteration": 1}
    assert list(read_events(tmp_path / "events.jsonl")) == [first, second]
    assert (tmp_path / "events.jsonl").read_bytes().endswith(b"\n")


def test_a_sync_racing_the_close_of_its_log_warns_of_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log's fsync runs on a thread while the driver may close the log: a
    descriptor closed under it is not a failure to report."""
    log = EventLog(tmp_path / "events.jsonl", RUN, FakeClock())
    log.emit("iteration_start", iteration=1)
    fd = log._fd
    assert fd is not None
    os.close(fd)  # as the driver's close would, between the thread's read and fsync
    log.sync()
    log._fd = None
    log.sync()
    assert capsys.readouterr().err == ""
    log.emit("iteration_end", iteration=1)
    log.sync()
    log.close()
    assert [e["type"] for e in read_events(tmp_path / "events.jsonl")] == [
        "iteration_start",
        "iteration_end",
    ]


def test_emit_cuts_the_excerpt_it_writes(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl", RUN, FakeClock())
    log.emit("iteration_end", iteration=1, excerpt="a" * 499 + EMOJI)
    log.close()
    (event,) = read_events(tmp_path / "events.jsonl")
    assert event["excerpt"] == "a" * 499


def test_emit_refuses_an_oversized_event_and_counts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = EventLog(tmp_path / "events.jsonl", RUN, FakeClock())
    assert log.emit("task_list", stage="S", items=["x" * MAX_EVENT_LINE_BYTES]) is None
    assert log.refused == 1
    assert log.emit("pause") is not None
    log.close()
    assert [e["type"] for e in read_events(tmp_path / "events.jsonl")] == ["pause"]
    assert capsys.readouterr().err.count("autopilot: warning:") == 1


def test_emit_all_appends_a_batch_in_one_write_and_skips_what_it_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = EventLog(tmp_path / "events.jsonl", RUN, FakeClock(100))
    log.emit("iteration_start", iteration=1)
    writes: list[bytes] = []
    real_write = os.write

    def counting_write(fd: int, data: bytes) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", counting_write)
    written = log.emit_all(
        [
            ("iteration_end", {"iteration": 1}),
            ("task_list", {"stage": "S", "items": ["x" * MAX_EVENT_LINE_BYTES]}),
            ("decision_applied", {"iteration": 1}),
        ]
    )
    log.close()
    assert [None if e is None else e["type"] for e in written] == [
        "iteration_end",
        None,
        "decision_applied",
    ]
    assert len(writes) == 1 and writes[0].count(b"\n") == 2
    types = [e["type"] for e in read_events(tmp_path / "events.jsonl")]
    assert types == ["iteration_start", "iteration_end", "decision_applied"]
    assert log.refused == 1 and "task_list not written" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [float("nan"), {1, 2}, object()])
def test_emit_never_raises_on_a_value_json_cannot_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: object
) -> None:
    log = EventLog(tmp_path / "events.jsonl", RUN, FakeClock())
    assert log.emit("usage_update", costUsd=bad) is None
    log.close()
    assert list(read_events(tmp_path / "events.jsonl")) == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("autopilot: warning: event usage_update not written")


def test_emit_never_raises_when_the_parent_is_a_regular_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "run"
    blocker.write_text("not a directory")
    log = EventLog(blocker / "events.jsonl", RUN, FakeClock())
    for _ in range(5):
        log.emit("pause")
    log.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("autopilot: warning: cannot append to")
    assert blocker.read_text() == "not a directory"


def test_emit_never_raises_when_its_directory_was_removed_and_recovers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    log = EventLog(run_dir / "events.jsonl", RUN, FakeClock(0))
    log.emit("pause")
    log.emit("resume")
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "cannot append to" in err
    # The run goes on: once the directory is back, events are written again.
    run_dir.mkdir()
    log.emit("stagnation", streak=1)
    log.close()
    assert [(e["type"], e["ts"]) for e in read_events(run_dir / "events.jsonl")] == [
        ("stagnation", 3)
    ]
    assert capsys.readouterr().err == ""


def test_emit_never_raises_on_a_full_disk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    log = EventLog(Path("/dev/full"), RUN, FakeClock())
    log.emit("pause")
    log.emit("resume")
    log.sync()
    log.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "No space left on device" in err


_WRITER = textwrap.dedent(
    """
    import sys
    import time
    from pathlib import Path
    from autopilot.store.events import EventLog
    path, writer, count = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    go = path.with_name("go")
    while not go.exists():
        time.sleep(0.001)
    log = EventLog(path, "run-%d" % writer, lambda: 1)
    for seq in range(count):
        # Line sizes from ~100 bytes to ~12 KiB, so writes of many sizes interleave.
        log.emit("usage_update", writer=writer, seq=seq, blob="w%d" % writer * ((seq * 37) % 4000))
    log.close()
    """
)


def test_concurrent_writers_leave_only_whole_lines(tmp_path: Path) -> None:
    writers, per_writer = 8, 500
    path = tmp_path / "events.jsonl"
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(w), str(per_writer)])
        for w in range(writers)
    ]
    (tmp_path / "go").touch()
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    raw_lines = path.read_bytes().split(b"\n")
    assert raw_lines[-1] == b""
    # A writer that sees another's line half-copied starts its own on a new line:
    # at worst a blank line, which readers skip.
    raw_lines = [raw for raw in raw_lines if raw]
    assert len(raw_lines) == writers * per_writer
    seen: dict[int, list[int]] = {w: [] for w in range(writers)}
    for raw in raw_lines:
        event = parse_event_line(raw)
        assert event is not None, raw[:80]
        assert event["runId"] == f"run-{event['writer']}"
        assert event["blob"] == f"w{event['writer']}" * ((event["seq"] * 37) % 4000)
        seen[event["writer"]].append(event["seq"])
    assert seen == {w: list(range(per_writer)) for w in range(writers)}


def test_emit_creates_the_log_private_to_the_user(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl", RUN, FakeClock())
    log.emit("pause")
    log.close()
    assert os.stat(tmp_path / "events.jsonl").st_mode & 0o077 == 0


def test_an_append_after_someone_elses_half_line_starts_on_a_new_line(tmp_path: Path) -> None:
    # An agent appended half a line: without the check, every following event would
    # be glued onto it and the whole line lost to readers.
    path = tmp_path / "events.jsonl"
    log = EventLog(path, RUN, FakeClock(0))
    log.emit("iteration_end", iteration=1)
    with path.open("ab") as other:
        other.write(b'{"type":"iteration_end","ts":5,"runId":"x","iterat')
    for number in range(2, 8):
        log.emit("iteration_end", iteration=number)
    log.close()
    assert [e["iteration"] for e in read_events(path)] == list(range(1, 8))
    assert path.read_bytes().count(b"\n") == 8


def test_an_append_after_someone_elses_whole_line_adds_no_blank_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path, RUN, FakeClock(0))
    log.emit("pause")
    with path.open("ab") as other:
        other.write(b'{"type":"resume","ts":5,"runId":"x"}\n')
    log.emit("stagnation", streak=1)
    log.close()
    assert b"\n\n" not in path.read_bytes()
    assert [e["type"] for e in read_events(path)] == ["pause", "resume", "stagnation"]


def test_a_new_log_object_checks_the_last_byte_before_its_first_append(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"type":"pause","ts":1,"runId":"r"}\n{"type":"res')
    log = EventLog(path, RUN, FakeClock(0))
    log.emit("stagnation", streak=1)
    log.emit("resume")
    log.close()
    assert [e["type"] for e in read_events(path)] == ["pause", "stagnation", "resume"]


def test_end_torn_line_ends_it_once(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"type":"pause","ts":1,"runId":"r"}\n{"type":"res')
    log = EventLog(path, RUN, FakeClock(0))
    assert log.end_torn_line() is True
    assert log.end_torn_line() is False
    log.emit("resume")
    log.close()
    assert path.read_bytes().count(b"\n") == 3


def test_read_events_skips_a_line_over_the_read_cap_and_reads_the_next(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    huge = b'{"type":"pause","ts":1,"runId":"r","x":"' + b"y" * MAX_READ_LINE_BYTES + b'"}\n'
    path.write_bytes(huge + b'{"type":"resume","ts":2,"runId":"r"}\n')
    assert [e["type"] for e in read_events(path)] == ["resume"]
