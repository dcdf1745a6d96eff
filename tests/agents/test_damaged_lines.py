"""Damaged output: each adapter reads its CLI's real captured streams with a line torn,
a field of another type or missing, or a stray line, without an exception and
without a value outside the report's contract (no negative count or cost, no session
id of another shape, no reset time past the year 5138, a failed verdict that names
its kind and words).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autopilot.agents.aider import AiderAdapter
from autopilot.agents.base import AgentAdapter, AgentEventKind, ErrorKind
from autopilot.agents.claude import ClaudeAdapter
from autopilot.agents.codex import CodexAdapter
from autopilot.agents.copilot import CopilotAdapter
from autopilot.agents.gemini import GeminiAdapter
from autopilot.agents.limits import LATEST_RESET_MS
from autopilot.agents.opencode import OpencodeAdapter
from autopilot.agents.pi import PiAdapter
from tests.agents.streams import STREAMS, Run, captures, fixed_clock, run_lines

ADAPTERS: dict[str, tuple[Callable[[], AgentAdapter], str]] = {
    "claude": (lambda: ClaudeAdapter("claude", clock=fixed_clock), "claude"),
    "codex": (lambda: CodexAdapter("codex", clock=fixed_clock), "codex"),
    "pi": (lambda: PiAdapter("pi", clock=fixed_clock), "pi"),
    "gemini": (lambda: GeminiAdapter("gemini", clock=fixed_clock), "gemini"),
    "copilot": (lambda: CopilotAdapter("copilot", clock=fixed_clock), "copilot"),
    "opencode": (lambda: OpencodeAdapter("opencode", clock=fixed_clock), "oc"),
    "aider": (lambda: AiderAdapter("aider", clock=fixed_clock), "aider"),
}
"""Each CLI's adapter and the prefix of its captures' names."""

CASES = [(name, capture) for name, (_, prefix) in ADAPTERS.items() for capture in captures(prefix)]

DELETED = object()
"""Stands for a field taken out of its object."""

OTHER_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(),  # NaN and infinities too (Python's JSON reads them back)
    st.text(max_size=12),
    st.sampled_from(["-rf", "--resume=x", "../../x", "1e400", "inf", "9" * 400]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.just(DELETED),
)
"""What a field may hold instead of its real value."""


def _lines(capture: str) -> list[str]:
    with (STREAMS / capture).open(encoding="utf-8", newline="") as handle:
        return [line.rstrip("\n") for line in handle]


def _paths(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """The path of every value inside a decoded JSON value, the value itself first."""
    yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _paths(inner, (*path, index))


def _replaced(value: Any, path: tuple[str | int, ...], new: object) -> Any:
    """A copy of ``value`` with what is at ``path`` replaced by ``new`` (or deleted)."""
    if not path:
        return None if new is DELETED else new
    copy = json.loads(json.dumps(value))
    inner = copy
    for step in path[:-1]:
        inner = inner[step]
    if new is DELETED:
        del inner[path[-1]]
    else:
        inner[path[-1]] = new
    return copy


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _within_contract(adapter: AgentAdapter, result: Run, lines_fed: int) -> None:
    """Every value of the report, its events and both verdicts (exit 0 and 1) is of
    its documented kind and range."""
    report = result.report
    assert report.lines == lines_fed
    for tokens in (report.input_tokens, report.output_tokens):
        assert tokens is None or _count(tokens), report
    assert report.tool_calls is None or _count(report.tool_calls), report
    cost = report.cost_usd
    assert cost is None or (isinstance(cost, float) and math.isfinite(cost) and cost >= 0)
    assert report.session_id is None or adapter.valid_session_id(report.session_id)
    assert report.reset_at_ms is None or 0 < report.reset_at_ms < LATEST_RESET_MS
    for text in (report.final_message, report.error_text, report.model, report.last_warning):
        assert text is None or isinstance(text, str)
    assert report.error_kind is None or isinstance(report.error_kind, ErrorKind)
    for denial in report.permission_denials:
        assert isinstance(denial.tool, str) and isinstance(denial.command, str | None)
    for event in result.events:
        assert isinstance(event.kind, AgentEventKind) and isinstance(event.text, str)
        assert isinstance(event.tool_name, str | None)
    for exit_code in (0, 1):
        verdict = adapter.classify(report, exit_code, "")
        assert verdict.ok or (isinstance(verdict.error_kind, ErrorKind) and verdict.message)
        assert verdict.reset_at_ms is None or 0 < verdict.reset_at_ms < LATEST_RESET_MS


@pytest.mark.parametrize(("name", "capture"), CASES)
def test_a_torn_line_anywhere_is_read_without_harm(name: str, capture: str) -> None:
    """Each line cut at a quarter, half and three quarters (a killed CLI's last line,
    two writes interleaved), the rest of the stream intact."""
    adapter = ADAPTERS[name][0]()
    lines = _lines(capture)
    for at, line in enumerate(lines):
        for quarter in (1, 2, 3):
            damaged = [*lines[:at], line[: len(line) * quarter // 4], *lines[at + 1 :]]
            _within_contract(adapter, run_lines(adapter, damaged, 1), len(lines))


JSON_CASES = [(name, capture) for name, capture in CASES if name != "aider"]


@pytest.mark.parametrize(("name", "capture"), JSON_CASES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_a_field_of_another_type_is_read_without_harm(
    name: str, capture: str, data: st.DataObject
) -> None:
    adapter = ADAPTERS[name][0]()
    lines = _lines(capture)
    at = data.draw(st.integers(min_value=0, max_value=len(lines) - 1), label="line")
    try:
        value = json.loads(lines[at])
    except ValueError:
        value = lines[at]
    path = data.draw(st.sampled_from(list(_paths(value))), label="path")
    new = data.draw(OTHER_VALUES, label="new value")
    damaged = [*lines[:at], json.dumps(_replaced(value, path, new)), *lines[at + 1 :]]
    _within_contract(adapter, run_lines(adapter, damaged, 1), len(lines))


@pytest.mark.parametrize(("name", "capture"), CASES)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_a_stray_line_is_read_without_harm(name: str, capture: str, data: st.DataObject) -> None:
    adapter = ADAPTERS[name][0]()
    lines = _lines(capture)
    at = data.draw(st.integers(min_value=0, max_value=len(lines)), label="where")
    stray = data.draw(
        st.one_of(
            st.text(max_size=80),
            st.sampled_from(["{", "[]", "null", '"x"', "[{}]", '{"type": 5}', "{" * 5000]),
        ).map(lambda text: text.replace("\n", " ").replace("\r", " ")),
        label="stray line",
    )
    damaged = [*lines[:at], stray, *lines[at:]]
    _within_contract(adapter, run_lines(adapter, damaged, 1), len(lines) + 1)


def test_a_codex_item_whose_type_is_not_text_is_no_tool_call() -> None:
    adapter = CodexAdapter("codex", clock=fixed_clock)
    lines = _lines("codex-stream-resume.jsonl")
    at = next(i for i, line in enumerate(lines) if '"item.started"' in line)
    item_started = json.loads(lines[at])
    for other in ([], {}):
        damaged = [*lines[:at], json.dumps(_replaced(item_started, ("item", "type"), other))]
        result = run_lines(adapter, [*damaged, *lines[at + 1 :]], 0)
        _within_contract(adapter, result, len(lines))
        assert result.report.tool_calls == 1  # its completion still counts the call
        assert result.verdict.ok


def test_an_infinite_retry_after_is_no_reset_time() -> None:
    adapter = OpencodeAdapter("opencode", clock=fixed_clock)
    lines = _lines("errors-and-more/oc_429.jsonl")
    at = next(i for i, line in enumerate(lines) if "retry-after" in line)
    error = json.loads(lines[at])
    path = ("error", "data", "responseHeaders", "retry-after")
    for absurd in ("inf", "1e400", 10**20, "9" * 400):
        damaged = [*lines[:at], json.dumps(_replaced(error, path, absurd)), *lines[at + 1 :]]
        result = run_lines(adapter, damaged, 1)
        _within_contract(adapter, result, len(lines))
        assert result.verdict.error_kind is ErrorKind.RATE_LIMIT
        assert result.verdict.reset_at_ms is None


def test_a_parser_without_feed_cannot_be_made() -> None:
    from autopilot.agents.parser import AgentParser

    class Unfinished(AgentParser):
        pass

    with pytest.raises(TypeError, match="abstract"):
        Unfinished()  # type: ignore[abstract]
