"""A hook run's work items: the next ready item before an iteration, the agent's
decision about it after (``core.backlog_step``, the same steps the driver uses).

Before: ``plan_iteration`` picks the item (a running one is resumed with
``pending-decision: missing``), marks it running in ``.autopilot/tasks.jsonl`` and
gives seed 002's continuation message. After: the reports the agent made with
``autopilot report`` (or a promoted ``.autopilot/consistency-decision.json``) are
claimed, a ``continue_next``'s checks are run by autopilot, and ``conclude_item``
records the item's new status.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from autopilot.core.backlog_step import (
    ItemConclusion,
    IterationPlan,
    choose_report,
    conclude_item,
    plan_iteration,
)
from autopilot.core.decisions import ItemDecision, ItemReport
from autopilot.core.vocabulary import EventType
from autopilot.core.workitems import ItemStatus
from autopilot.loop.checks import run_checks
from autopilot.store.backlog import Backlog, BacklogFile
from autopilot.store.reports import claim_reports, take_decision_file

Emit = Callable[..., Any]


class HookBacklog:
    """The project's backlog as one hook run works through it.

    Args:
        root: The runs root (the backlog's lock lives in ``<root>/.locks``).
        run_id: The run.
        project: The work tree.
        run_folder: The run's folder (its waiting reports).
        emit: Appends one event: ``emit(EventType, **fields)``.
    """

    def __init__(
        self, root: Path, run_id: str, project: Path, run_folder: Path, emit: Emit
    ) -> None:
        locks = root / ".locks"
        locks.mkdir(mode=0o700, exist_ok=True)
        self.store = Backlog(project, locks)
        self.run_id = run_id
        self.project = project
        self.run_folder = run_folder
        self.emit = emit

    def _emit_all(self, events: tuple[dict[str, object], ...]) -> None:
        for event in events:
            fields = {k: v for k, v in event.items() if k != "type"}
            self.emit(EventType(str(event["type"])), **fields)

    def plan(self, iteration: int) -> IterationPlan:
        """The item of ``iteration`` and its prompt, or why there is none.

        Raises:
            BacklogError: the backlog cannot be read.
        """
        return plan_iteration(self.run_id, self.store.read().items, iteration)

    def start(self, plan: IterationPlan) -> None:
        """Mark the planned item running in ``tasks.jsonl`` and record it.

        Raises:
            BacklogError: the backlog cannot be written.
        """
        chosen = plan.item
        if chosen is not None:
            self.store.update(lambda backlog: backlog.replace_item(chosen))
            self._emit_all(plan.events)

    def conclude(self, iteration: int, attempt_folder: Path) -> ItemConclusion | None:
        """Apply the agent's decision about the running item (None: none was running).

        Raises:
            BacklogError: the backlog cannot be read or written.
        """
        items = self.store.read().items
        running = next((i for i in items if i.status is ItemStatus.RUNNING), None)
        if running is None:
            return None
        reports: list[ItemReport] = [
            claimed.report for claimed in claim_reports(self.run_folder) if claimed.report
        ]
        taken = take_decision_file(self.project, list(items))
        problems: list[str] = []
        if taken is not None:
            report_in_file, file_problems = taken
            problems.extend(file_problems)
            if report_in_file is not None:
                reports.append(report_in_file)
        chosen, refused = choose_report(items, running.id, reports)
        for problem in [*problems, *refused]:
            self.emit(EventType.WARNING, note=problem, iteration=iteration)
        checks = None
        if chosen is not None and chosen.decision is ItemDecision.CONTINUE_NEXT:
            attempt_folder.mkdir(parents=True, exist_ok=True)
            checks = run_checks(
                running.acceptance_criteria, cwd=self.project, folder=attempt_folder
            ).outcome
        conclusion = conclude_item(items, running, chosen, checks, iteration)
        after = conclusion.item

        def record(backlog: BacklogFile) -> BacklogFile:
            return backlog.replace_item(after)

        self.store.update(record)
        self._emit_all(conclusion.events)
        return conclusion
