"""Lines from a byte stream: bounded memory, linear time, oversized lines skipped."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from autopilot.store.lines import LineSplitter, iter_lines


def _expected(data: bytes, cap: int) -> tuple[list[bytes], int]:
    whole = data.split(b"\n")[:-1]
    return [line for line in whole if len(line) <= cap], sum(len(line) > cap for line in whole)


@given(
    pieces=st.lists(st.sampled_from([b"a", b"bb", b"\n", b"cccccccc", b"\xff", b"\n\n"])),
    cut=st.lists(st.integers(min_value=1, max_value=7), min_size=1),
    cap=st.integers(min_value=0, max_value=12),
)
def test_any_chunking_gives_the_lines_within_the_cap(
    pieces: list[bytes], cut: list[int], cap: int
) -> None:
    data = b"".join(pieces)
    splitter = LineSplitter(cap)
    lines: list[bytes] = []
    position = 0
    for index in range(len(data)):
        size = cut[index % len(cut)]
        lines += splitter.feed(data[position : position + size])
        position += size
        if position >= len(data):
            break
    expected, oversized = _expected(data, cap)
    tail = data.rsplit(b"\n", 1)[-1]
    last = splitter.finish()
    assert lines == expected
    assert last == (tail if tail and len(tail) <= cap else None)
    assert splitter.oversized == oversized + (len(tail) > cap)


def test_a_line_at_the_cap_is_kept_and_one_over_it_skipped() -> None:
    data = b"12345\n123456\nok\n"
    assert list(iter_lines(io.BytesIO(data), max_line_bytes=5, chunk_bytes=2)) == [b"12345", b"ok"]


def test_the_partial_last_line_is_held_back_unless_asked_for() -> None:
    data = b"one\ntwo"
    assert list(iter_lines(io.BytesIO(data), max_line_bytes=10)) == [b"one"]
    assert list(iter_lines(io.BytesIO(data), max_line_bytes=10, hold_back_partial=False)) == [
        b"one",
        b"two",
    ]


def test_the_line_after_a_skipped_one_is_read_whole_across_chunks() -> None:
    data = b"x" * 1000 + b"\n" + b'{"type":"result"}\n'
    lines = list(iter_lines(io.BytesIO(data), max_line_bytes=100, chunk_bytes=7))
    assert lines == [b'{"type":"result"}']
