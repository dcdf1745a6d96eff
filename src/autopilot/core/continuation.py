"""The prompt of a backlog iteration: its work item's continuation message (pure).

Shape (fields in this order; the bracketed ones only when they apply)::

    [autopilot]
    run: <run id>
    work-item: <item id>
    focus-layer: <micro|meso|macro|meta>
    attempt: <n>
    [pending-decision: missing]
    allowed-surface:
    - <path pattern>            (or "- any path" when nothing fences the run)
    acceptance-criteria:
    - <id>: <text> [check: <command>]
    [reopen-target: <micro|meso|macro>]
    [previous-attempt:
    - verdict: <pass|fail>
    - <feedback line>…
    - <paths an earlier attempt changed outside the allowed surface>]
    before-stop:
    - <how to report the decision with autopilot report>…
    prompt:
    <the item's prompt>

``pending-decision: missing`` means the item's last iteration ended without a
decision; ``previous-attempt`` carries the last verdict and what the next attempt
must know (a failing check's output tail, a surface violation, the user's answer),
and, until the item is done, the paths an earlier attempt changed outside the allowed
surface.
"""

from __future__ import annotations

from collections.abc import Sequence

from autopilot.core.decisions import surface_feedback
from autopilot.core.workitems import ItemStatus, WorkItem

REPORT_COMMAND = "autopilot report"


def _criteria_flags(item: WorkItem) -> str:
    return " ".join(f"--criterion {c.id}=pass" for c in item.acceptance_criteria)


def before_stop_lines(item: WorkItem) -> list[str]:
    """How the agent reports its decision, for this item's id and criteria."""
    item_id = item.id
    flags = _criteria_flags(item)
    done = f"{REPORT_COMMAND} continue_next --item {item_id}"
    if flags:
        done += f" {flags}"
    return [
        "report your decision with one autopilot report command (through your shell tool) "
        "before you stop; it says at once if something is wrong, so fix the call and run it "
        "again.",
        f'when every acceptance criterion holds: {done} --evidence "<what shows it>". '
        "autopilot then runs each criterion's check itself; the item is completed only if "
        "they pass.",
        f"when verification fails or drift remains: {REPORT_COMMAND} reopen_micro --item "
        f'{item_id} --evidence "<what fails>" (reopen_meso or reopen_macro when the module '
        "or the approach must change).",
        f"to try the item again from a clean start: {REPORT_COMMAND} retry_same_unit --item "
        f'{item_id} --evidence "<why>".',
        f"only when neither the work nor the repository can answer it: {REPORT_COMMAND} "
        f'ask_user_meta --item {item_id} --evidence "<your question>".',
        "do not edit .autopilot/tasks.jsonl yourself; autopilot changes it from your report.",
    ]


def continuation_message(
    run_id: str,
    item: WorkItem,
    *,
    pending_missing: bool = False,
    run_surface: Sequence[str] = (),
) -> str:
    """The prompt for an iteration that works on ``item``.

    Args:
        run_id: The run's id.
        item: The item being worked on (already ``running``).
        pending_missing: The item's last iteration ended without a decision.
        run_surface: The run's allowed surfaces (from its approved boundary), used
            when the item names none.

    Returns:
        The message, ending with the item's prompt and a newline.
    """
    lines = [
        "[autopilot]",
        f"run: {run_id}",
        f"work-item: {item.id}",
        f"focus-layer: {item.focus_layer.value}",
        f"attempt: {item.attempt}",
    ]
    if pending_missing:
        lines.append("pending-decision: missing")
    surface = list(item.allowed_surface or run_surface)
    lines.append("allowed-surface:")
    if surface:
        lines.extend(f"- {path}" for path in surface)
    else:
        lines.append("- any path")
    lines.append("acceptance-criteria:")
    if not item.acceptance_criteria:
        lines.append("- (none given: the prompt says what done means)")
    for criterion in item.acceptance_criteria:
        check = f" [check: {criterion.check}]" if criterion.check else ""
        lines.append(f"- {criterion.id}: {' '.join(criterion.text.split())}{check}")
    completion = item.completion
    if item.status in (ItemStatus.REOPENED, ItemStatus.RUNNING) and completion.reopen_target:
        lines.append(f"reopen-target: {completion.reopen_target.value}")
    outside = completion.surface_violations
    if completion.verdict is not None or completion.feedback or outside:
        lines.append("previous-attempt:")
        if completion.verdict is not None:
            lines.append(f"- verdict: {completion.verdict.value}")
        for text in (completion.feedback or "").splitlines():
            lines.append(f"- {text}" if text.strip() else "-")
        if outside and completion.feedback != surface_feedback(outside):
            lines.append(
                "- an earlier attempt changed files outside the allowed surface (autopilot "
                f"reverts nothing; undo what the item does not need): {', '.join(outside)}"
            )
    lines.append("before-stop:")
    lines.extend(f"- {line}" for line in before_stop_lines(item))
    lines.append("prompt:")
    lines.append(item.prompt.rstrip("\n"))
    return "\n".join(lines) + "\n"


NOTICE_REASON_CHARS = 300


def reopened_notice(item: WorkItem) -> str | None:
    """The driver's notice that ``item`` was reopened (delivered with the next prompt
    through the run's inbox), or None if it is not reopened."""
    if item.status is not ItemStatus.REOPENED:
        return None
    target = item.completion.reopen_target
    layer = f" ({target.value})" if target is not None else ""
    why = " ".join((item.completion.feedback or "").split()) or "its decision reopened it"
    if len(why) > NOTICE_REASON_CHARS:
        why = why[: NOTICE_REASON_CHARS - 1] + "…"
    return (
        f"Work item {item.id} was reopened{layer} after attempt {item.attempt}: {why}. "
        "It is back in the queue; when it is your work item, its prompt says what to fix."
    )
