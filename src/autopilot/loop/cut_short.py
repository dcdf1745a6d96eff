"""The attempt a driver crash cut short, as what it left on disk tells it
(``docs/formats.md``, "Crash recovery").

Its tokens, cost, session and final result come from its raw ``stdout.log``, parsed
again. Its time is charged from its ``iteration_start`` to the driver's last
heartbeat on that file (``core.spend.cut_short_ms``), never less than it ran. Its
commits are those on HEAD since the ``head`` its ``iteration_start`` recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msgspec import Struct

from autopilot.agents.base import AgentAdapter, IterationReport
from autopilot.core.attempt import Attempt, CommitSeen
from autopilot.core.spend import cut_short_ms
from autopilot.core.structs import replace
from autopilot.core.vocabulary import EndedBy, EventType, Progress
from autopilot.loop.observe import reported_attempt, sane_report
from autopilot.loop.process import HEARTBEAT_SECONDS
from autopilot.store.events import read_events
from autopilot.store.lines import iter_lines
from autopilot.store.rundir import AttemptDir
from autopilot.workspace.git import TreeMark
from autopilot.workspace.marks import Workspace

_MAX_RECOVERED_LINE_BYTES = 16 * 1024 * 1024


class RecoveredAttempt(Struct, frozen=True):
    """The spend of an attempt the driver did not see to its end.

    Attributes:
        report: What its output said (tokens, cost, session id, final message).
        prompt_written_ms: When its prompt was saved (epoch ms), if known.
        last_written_ms: The latest modification of its raw stdout or stderr (epoch
            ms): its output's last write or the driver's last heartbeat; None if
            neither file exists.
    """

    report: IterationReport
    prompt_written_ms: int | None = None
    last_written_ms: int | None = None


def recover_attempt(folder: Path | None, adapter: AgentAdapter) -> RecoveredAttempt | None:
    """Parse an interrupted attempt's saved output (None if there is none)."""
    if folder is None or not folder.is_dir():
        return None
    parser = adapter.new_parser()
    attempt = AttemptDir(folder)
    try:
        with attempt.stdout.open("rb") as stream:
            # Streamed: a line over the cap is skipped as it passes (the raw copy can
            # hold gigabytes), so recovery takes linear time and bounded memory.
            for raw in iter_lines(stream, max_line_bytes=_MAX_RECOVERED_LINE_BYTES):
                parser.feed(raw.decode("utf-8", "replace"))
    except OSError:
        pass
    return RecoveredAttempt(
        parser.report(),
        _modified_ms(attempt.prompt),
        max((t for t in map(_modified_ms, (attempt.stdout, attempt.stderr)) if t), default=None),
    )


def _modified_ms(path: Path) -> int | None:
    try:
        return int(path.stat().st_mtime * 1000)
    except OSError:
        return None


def iteration_start(log_path: Path, number: int) -> dict[str, Any]:
    """The last ``iteration_start`` event of iteration ``number`` ({} if none)."""
    found: dict[str, Any] = {}
    for event in read_events(log_path):
        if event["type"] == EventType.ITERATION_START.value and event.get("iteration") == number:
            found = event
    return found


def iteration_started_ms(log_path: Path, number: int) -> int | None:
    """The ``ts`` (epoch ms) of the last ``iteration_start`` of iteration ``number``."""
    ts = iteration_start(log_path, number).get("ts")
    return ts if isinstance(ts, int) else None


def attempt_from_output(
    number: int,
    folder: Path | None,
    adapter: AgentAdapter,
    now_ms: int,
    *,
    started_ms: int | None = None,
    outlived: bool = False,
) -> Attempt:
    """Attempt ``folder`` of iteration ``number``, as its saved output tells it
    (``ended_by`` ``DRIVER_DIED``; see ``interrupted_attempt``). Its time runs from
    ``started_ms`` (else its prompt's saving) by ``cut_short_ms``'s rule."""
    recovered = recover_attempt(folder, adapter)
    if started_ms is None and recovered is not None:
        started_ms = recovered.prompt_written_ms
    report = sane_report(recovered.report, now_ms) if recovered else IterationReport()
    try:
        prompt = (
            AttemptDir(folder).prompt.read_text(encoding="utf-8", errors="replace")
            if folder
            else ""
        )
    except OSError:
        prompt = ""
    classification = adapter.classify(report, 0, "") if report.result_seen else None
    name = folder.name if folder is not None else ""
    attempt = reported_attempt(number, name, prompt, EndedBy.DRIVER_DIED, report, classification)
    return replace(
        attempt,
        duration_ms=cut_short_ms(
            started_ms,
            recovered.last_written_ms if recovered else None,
            now_ms,
            outlived=outlived,
            heartbeat_ms=int(HEARTBEAT_SECONDS * 1000),
        ),
    )


def with_commits_since_start(attempt: Attempt, log_path: Path, workspace: Workspace) -> Attempt:
    """``attempt`` with the commits it made: those on HEAD since the HEAD its
    ``iteration_start`` in ``log_path`` recorded (``head``), which are progress and
    become ``commit_observed`` events. Unchanged when that HEAD is unknown, git
    cannot answer, or nothing was committed."""
    head = iteration_start(log_path, attempt.number).get("head")
    after = workspace.mark()
    if not isinstance(head, str) or after.head is None or after.entries is None:
        return attempt
    commits = workspace.new_commits(
        TreeMark(head, {}, tips=frozenset({head})),
        TreeMark(after.head, after.entries, tips=frozenset({after.head})),
    )
    if not commits:
        return attempt
    seen = tuple(CommitSeen(c.sha, c.subject, c.trailers) for c in commits)
    return replace(attempt, commits=seen, progress=Progress.MADE)
