"""A long ``index.jsonl`` (msgspec, in one call where it can) gives the rows a short
one gives (``json``, line by line), whatever its lines hold."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autopilot.store import index

_ODD = [
    b"",
    b"   ",
    b"not json",
    b"1 2",
    b"[1",
    b"]",
    b'{"type":"armed",',
    b'"runId":"split"}',
    b'{"type":"armed","runId":"a"} {"type":"armed","runId":"b"}',
    b'{"type":"armed","runId":"nan","ts":NaN}',
    b'{"type":"armed","runId":"big","ts":' + b"9" * 400 + b"}",
    b'{"type":"armed","runId":"deep","x":' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"type":"armed","runId":"crlf"}\r',
    b'{"type":"armed","runId":"\\ud800"}',
]

_ROW = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["armed", "armed", "complete", 5]),
        "runId": st.sampled_from(["r-1", "r-2", "", None, "é-3"]),
        "ts": st.integers(0, 2**53) | st.none(),
    },
    optional={"label": st.text(max_size=8), "maxIterations": st.integers(0, 99)},
)


@st.composite
def _line(draw: st.DrawFn) -> bytes:
    if draw(st.booleans()):
        return draw(st.sampled_from(_ODD))
    return json.dumps(draw(_ROW), ensure_ascii=draw(st.booleans())).encode()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_line(), max_size=10), final_newline=st.booleans())
def test_a_long_index_gives_the_rows_of_a_short_one(
    lines: list[bytes], final_newline: bool
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        data = b"\n".join(lines) + (b"\n" if final_newline else b"")
        (root / index.INDEX_FILE).write_bytes(data)
        short = list(index.read_index(root))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(index, "PLAIN_INDEX_BYTES", -1)
            assert list(index.read_index(root)) == short
