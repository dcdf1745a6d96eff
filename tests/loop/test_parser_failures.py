"""An adapter that raises on damaged output never ends a run, nor the view: the guard
(``agents.guard``) skips the line, keeps the last report or lets the exit code
classify, and the driver logs one ``warning``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from autopilot.agents.base import (
    AgentEvent,
    Classification,
    IterationReport,
    StreamParser,
)
from autopilot.agents.claude import ClaudeAdapter
from autopilot.agents.guard import GuardedAdapter, guarded
from autopilot.config import RunConfig
from autopilot.loop.cut_short import recover_attempt
from tests.conftest import read_jsonl
from tests.fakes import Scripted, arm, claude_lines

BOOM = "BOOM"


class _RaisingParser:
    """Claude Code's parser, except that a line holding BOOM makes ``feed`` raise, and
    with ``report_raises`` every ``report`` after the final result raises too."""

    def __init__(self, parser: StreamParser, *, report_raises: bool) -> None:
        self._parser = parser
        self._report_raises = report_raises

    def feed(self, line: str) -> list[AgentEvent]:
        if BOOM in line:
            raise ValueError("a field of another type")
        return self._parser.feed(line)

    def report(self) -> IterationReport:
        report = self._parser.report()
        if self._report_raises and report.result_seen:
            raise KeyError("result")
        return report


class _RaisingAdapter(ClaudeAdapter):
    def __init__(self, *, classify_raises: bool = False, report_raises: bool = False) -> None:
        super().__init__(sys.executable)
        self.classify_raises = classify_raises
        self.report_raises = report_raises

    def new_parser(self) -> StreamParser:
        return _RaisingParser(super().new_parser(), report_raises=self.report_raises)

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        if self.classify_raises:
            raise IndexError("list index out of range")
        return super().classify(report, exit_code, stderr_tail)


def _events(folder: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(folder / "events.jsonl") if e["type"] == kind]


def test_a_parser_that_raises_on_a_line_is_a_warning_and_the_run_goes_on(tmp_path: Path) -> None:
    rig = arm(tmp_path)
    lines = claude_lines("All done.\n\nCOMPLETE")
    driver, runner = rig.driver(
        [Scripted([*lines[:-1], BOOM, BOOM, lines[-1]])], adapter=_RaisingAdapter()
    )
    result = driver.run()
    assert (result.terminal_type, result.reason) == ("complete", "completion_promise")
    assert len(runner.requests) == 1
    warnings = [e["note"] for e in _events(rig.folder, "warning")]
    assert len(warnings) == 1  # once per attempt, not once per line
    assert warnings[0].startswith("the claude adapter failed on a line of the agent's output")
    assert "ValueError: a field of another type" in warnings[0]


def test_a_report_that_raises_is_a_warning_and_the_run_goes_on(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    driver, runner = rig.driver(
        [Scripted(claude_lines("All done.\n\nCOMPLETE"))],
        adapter=_RaisingAdapter(report_raises=True),
    )
    result = driver.run()
    # The last report that could be read had no final result: no completed iteration
    # carried the promise, and the budget ended the run.
    assert (result.terminal_type, result.reason) == ("abort", "max_iterations")
    assert len(runner.requests) == 2
    notes = [e["note"] for e in _events(rig.folder, "warning")]
    assert sum("failed to report on the agent's output" in note for note in notes) == 2


def test_a_classification_that_raises_lets_the_exit_code_decide(tmp_path: Path) -> None:
    rig = arm(tmp_path)
    driver, _ = rig.driver(
        [Scripted(claude_lines("All done.\n\nCOMPLETE"))],
        adapter=_RaisingAdapter(classify_raises=True),
    )
    result = driver.run()
    assert (result.terminal_type, result.reason) == ("complete", "completion_promise")
    notes = [e["note"] for e in _events(rig.folder, "warning")]
    assert any("failed to classify the attempt" in note and "IndexError" in note for note in notes)
    assert [e["outcome"] for e in _events(rig.folder, "iteration_end")] == ["ok"]


def test_a_failed_classification_of_a_failed_process_is_an_agent_error() -> None:
    said: list[str] = []
    adapter = GuardedAdapter(_RaisingAdapter(classify_raises=True), said.append)
    failed = adapter.classify(IterationReport(error_text="boom"), 1, "stderr")
    assert (failed.ok, failed.error_kind, failed.message) == (False, "unknown", "boom")
    assert adapter.classify(IterationReport(), 0, "").ok is True
    assert len(said) == 2


def test_a_guarded_parser_counts_the_line_it_raised_on_as_bad_and_warns_once() -> None:
    said: list[str] = []
    parser = guarded(_RaisingAdapter(), said.append).new_parser()
    first = claude_lines("hello")[0]
    assert [event.kind for event in parser.feed(first)] == ["session"]
    assert parser.feed(BOOM) == []
    assert parser.feed(BOOM) == []
    report = parser.report()
    assert (report.lines, report.bad_lines) == (3, 2)
    assert len(said) == 1


def test_recovery_reads_damaged_saved_output_without_an_exception(tmp_path: Path) -> None:
    folder = tmp_path / "iter-0001"
    folder.mkdir()
    lines = claude_lines("done")
    (folder / "prompt.md").write_text("work")
    (folder / "stdout.log").write_text("\n".join([lines[0], BOOM, *lines[1:]]) + "\n")
    said: list[str] = []
    recovered = recover_attempt(folder, guarded(_RaisingAdapter(), said.append))
    assert recovered is not None
    assert recovered.report.bad_lines == 1
    assert len(said) == 1
