"""The figures ``status`` reads from a log and an inbox as plain JSON
(``store.status_figures``) are the typed readers' (``read_snapshot``,
``pending_messages``) over any log and inbox."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from autopilot.core.delivery import MessageSource
from autopilot.loop.messages import pending_messages
from autopilot.store.reader import read_snapshot
from autopilot.store.status_figures import log_figures, pending_counts

_RUN = "proj-1700000000000"
_START = 1_700_000_000_000

moments = st.one_of(
    st.integers(_START, _START + 600_000), st.floats(_START, _START + 500_000, allow_nan=False)
)
"""Epoch ms, whole or not."""

_TEXTS = st.sampled_from(["done", "  two\n words ", "", "x" * 230, "tab\there"])

_KINDS = [
    "armed",
    "iteration_start",
    "iteration_end",
    "usage_update",
    "pause",
    "resume",
    "complete",
    "abort",
    "restored",
    "message_delivered",
    "stagnation",
]


@st.composite
def events_of(draw: st.DrawFn, run_id: str) -> list[dict[str, Any]]:
    """A log of ``run_id``: events of the types the figures fold, in any order, with
    fields of any kind."""
    events = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(_KINDS))
        event: dict[str, Any] = {"type": kind, "ts": draw(moments), "runId": run_id}
        number = draw(st.sampled_from([1, 2, 2.0, None, "3"]))
        if number is not None:
            event["iteration"] = number
        if draw(st.booleans()):
            event["excerpt"] = draw(st.one_of(_TEXTS, st.just(7)))
        if kind in ("complete", "abort"):
            event["reason"] = draw(st.sampled_from(["complete", "user_stopped", None]))
        if kind == "restored":
            event["checkpoint"] = draw(st.sampled_from(["cp-1", "", None]))
            event["safetyCheckpoint"] = draw(st.sampled_from(["cp-safe", "", 3]))
            event["filesChanged"] = draw(st.sampled_from([None, 0, 1, 4, "2"]))
            event["sha"] = draw(st.sampled_from([None, "abc", ""]))
        if kind == "message_delivered":
            event["messageId"] = draw(st.sampled_from([MESSAGES[0][1], MESSAGES[3][1], 5]))
        events.append(event)
    return events


MESSAGES = [
    ("new", "1700000000001-0000000a", "user", "message"),
    ("new", "1700000000002-0000000b", "driver", "reopened"),
    ("cur", "1700000000001-0000000a", "user", "message"),
    ("cur", "1700000000003-0000000c", "user", "answer"),
    ("cur", "1700000000004-0000000d", "driver", "budget_warning"),
]
"""Message files: (folder, id, source, kind)."""


def write_inbox(folder: Path, chosen: set[int]) -> None:
    """Write the ``MESSAGES`` whose indexes are ``chosen`` into the run ``folder``."""
    for index in sorted(chosen):
        where, ident, source, kind = MESSAGES[index]
        box = folder / "inbox" / where
        box.mkdir(parents=True, exist_ok=True)
        body = {"id": ident, "source": source, "kind": kind, "text": "hi", "queuedAt": 1}
        (box / f"{ident}.json").write_text(json.dumps(body))


def _log(folder: Path, events: list[dict[str, Any]], tail: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(e) + "\n" for e in events)
    (folder / "events.jsonl").write_bytes(text.encode() + tail)


@settings(max_examples=400, deadline=None)
@given(
    events_of(_RUN),
    st.sets(st.integers(0, len(MESSAGES) - 1)),
    st.sampled_from([b"", b"not json\n", b'{"type": "complete", "ts": 1']),
)
@example(
    [
        {"type": "iteration_start", "ts": _START, "runId": _RUN, "iteration": 1},
        {"type": "iteration_end", "ts": _START, "runId": _RUN, "iteration": 1},
        {"type": "usage_update", "ts": _START, "runId": _RUN, "excerpt": "after the end"},
    ],
    set(),
    b"",
)
def test_the_figures_are_the_typed_readers(
    events: list[dict[str, Any]], messages: set[int], tail: bytes
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / _RUN
        _log(folder, events, tail)
        write_inbox(folder, messages)
        figures = log_figures(folder / "events.jsonl")
        snap = read_snapshot(folder / "events.jsonl")
        assert figures is not None
        counts = pending_counts(folder, figures.delivered)
        pending = pending_messages(folder)
    assert figures.terminal == snap.terminal
    assert figures.terminal_at == snap.terminalAt
    assert figures.last_restore == snap.lastRestore
    assert figures.last_excerpt == snap.lastExcerpt
    users = sum(1 for m in pending if m.source is MessageSource.USER)
    assert counts == (len(pending), users)


def test_a_missing_log_has_no_figures(tmp_path: Path) -> None:
    figures = log_figures(tmp_path / "events.jsonl")
    assert figures is not None
    assert (figures.terminal, figures.last_excerpt, figures.last_restore) == (False, None, None)


def test_a_message_the_inbox_would_put_aside_gives_no_count(tmp_path: Path) -> None:
    write_inbox(tmp_path, {1})
    path = tmp_path / "inbox" / "new" / f"{MESSAGES[1][1]}.json"
    assert pending_counts(tmp_path, set()) == (1, 0)
    for body in ("{", '{"id": "1700000000002-0000000b"}', json.dumps({"id": "x"})):
        path.write_text(body)
        assert pending_counts(tmp_path, set()) is None
