"""An adapter whose parsing and classification never raise: the one guard between an
agent's (possibly damaged) output and the driver, recovery and the live view.

An adapter's parser is written against one CLI version's output; a line it was never
meant to see can still make it raise. Through ``GuardedAdapter`` such a line is counted
as not understood (``IterationReport.bad_lines``) and skipped, a ``report`` or
``classify`` that raises gives the last report or a classification from the exit code,
and the first failure of each kind is passed to ``on_failure`` (the driver logs it as a
``warning`` event). The run goes on either way.
"""

from __future__ import annotations

from collections.abc import Callable

from autopilot.agents.base import (
    AgentAdapter,
    AgentEvent,
    Classification,
    Invocation,
    InvocationRequest,
    IterationReport,
    StreamParser,
)
from autopilot.core.structs import replace
from autopilot.core.vocabulary import ErrorKind

OnFailure = Callable[[str], None]
"""Told, in one line, that the adapter's code raised and what was done instead."""


def _failure(adapter: str, what: str, error: Exception) -> str:
    return f"the {adapter} adapter failed {what} ({type(error).__name__}: {error})"[:500]


class GuardedParser:
    """A ``StreamParser`` that never raises.

    Args:
        parser: The adapter's parser.
        adapter: The adapter's name, for the failure line.
        on_failure: Told once per parser about its first failure.
    """

    def __init__(self, parser: StreamParser, adapter: str, on_failure: OnFailure) -> None:
        self._parser = parser
        self._adapter = adapter
        self._on_failure = on_failure
        self._failed = False
        self._skipped_lines = 0
        self._last = IterationReport()

    def _fail(self, what: str, error: Exception) -> None:
        if not self._failed:
            self._failed = True
            self._on_failure(_failure(self._adapter, what, error))

    def feed(self, line: str) -> list[AgentEvent]:
        """The parser's events for ``line``; none for a line the parser raised on."""
        try:
            return self._parser.feed(line)
        except Exception as error:  # damaged output must not end the run
            self._skipped_lines += 1
            self._fail("on a line of the agent's output; the line was skipped", error)
            self._keep_report()
            return []

    def _keep_report(self) -> None:
        try:
            self._last = self._parser.report()
        except Exception as error:
            self._fail("to report on the agent's output; its last report stands", error)

    def report(self) -> IterationReport:
        """The parser's report, with the lines it raised on counted as bad lines; its
        last good report if ``report`` itself raises."""
        self._keep_report()
        if not self._skipped_lines:
            return self._last
        return replace(
            self._last,
            lines=self._last.lines + self._skipped_lines,
            bad_lines=self._last.bad_lines + self._skipped_lines,
        )


class GuardedAdapter:
    """An ``AgentAdapter`` whose ``new_parser`` gives ``GuardedParser``s and whose
    ``classify`` never raises (the exit code decides instead).

    Args:
        adapter: The adapter to guard.
        on_failure: Told about each parser's first failure and each failed
            classification.
    """

    def __init__(self, adapter: AgentAdapter, on_failure: OnFailure) -> None:
        self.inner = adapter
        self._on_failure = on_failure

    @property
    def name(self) -> str:
        """The ``--agent`` name."""
        return self.inner.name

    @property
    def verified_version(self) -> str:
        """The CLI version the adapter was verified against."""
        return self.inner.verified_version

    @property
    def supports_sessions(self) -> bool:
        """Whether ``--continue`` can resume the agent's session."""
        return self.inner.supports_sessions

    @property
    def env_needed(self) -> tuple[str, ...]:
        """Environment variables the CLI reads (globs)."""
        return self.inner.env_needed

    def check_installed(self) -> None:
        """The adapter's check (raises ``AgentNotFoundError``)."""
        self.inner.check_installed()

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """The adapter's invocation (a failure here is the launcher's ``launch_failed``)."""
        return self.inner.build_invocation(request)

    def new_parser(self) -> StreamParser:
        """A parser for one iteration's stdout that never raises."""
        return GuardedParser(self.inner.new_parser(), self.inner.name, self._on_failure)

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """The adapter's classification; if it raises, ``ok`` when the process exited 0
        and the agent reported no error, else an ``unknown`` failure."""
        try:
            return self.inner.classify(report, exit_code, stderr_tail)
        except Exception as error:
            self._on_failure(
                _failure(self.inner.name, "to classify the attempt; its exit code decides", error)
            )
        if exit_code == 0 and not report.is_error:
            return Classification(True)
        return Classification(False, ErrorKind.UNKNOWN, report.error_text or stderr_tail or None)

    def valid_session_id(self, text: str) -> bool:
        """Whether ``text`` has the shape of this CLI's session ids."""
        try:
            return self.inner.valid_session_id(text)
        except Exception:
            return False


def guarded(adapter: AgentAdapter, on_failure: OnFailure) -> AgentAdapter:
    """``adapter`` behind a ``GuardedAdapter`` (an adapter already guarded is kept)."""
    if isinstance(adapter, GuardedAdapter):
        return adapter
    return GuardedAdapter(adapter, on_failure)
