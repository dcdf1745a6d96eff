"""What the live view shows, as pure functions of (state, snapshot, now).

Nothing here reads a file or the clock: the Textual widgets call these with the
run's ``state.json``, its folded ``Snapshot`` and an injected ``now_ms``, so the
same inputs always give the same screen (and snapshot tests are stable). Times are
epoch milliseconds; durations are shown as ``1h02m03s``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autopilot.store.snapshot import Snapshot
from autopilot.view.figures import as_number
from autopilot.view.plain import fmt_duration as fmt_duration  # noqa: PLC0414 (its users)
from autopilot.view.plain import format_time

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    State = Mapping[str, Any]
    """A run's ``state.json`` as read (a type for annotations only)."""


def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def elapsed_ms(state: State | None, snapshot: Snapshot, now_ms: int) -> int | None:
    """Run time so far, paused time excluded; frozen at the terminal event.

    The start is ``state.json`` ``startedAt`` (else the ``armed`` event); the end is
    the fold's ``terminalAt`` (when the terminal event was logged) or ``now_ms``. Paused time is
    ``totalPausedMs`` plus the open pause since ``pausedAt``.
    """
    state = state or {}
    started = as_number(state.get("startedAt"))
    if started is None:
        started = as_number(snapshot.startedAt)
    if started is None:
        return None
    end = as_number(snapshot.terminalAt) if snapshot.terminal else None
    if end is None:
        end = float(now_ms)
    paused = as_number(state.get("totalPausedMs")) or 0.0
    paused_at = as_number(state.get("pausedAt"))
    if state.get("paused") and paused_at is not None:
        paused += max(0.0, end - paused_at)
    return int(max(0.0, end - started - paused))


def iteration_text(state: State | None, snapshot: Snapshot) -> str:
    """``iteration 3 of 10`` (``of ∞`` without a limit)."""
    state = state or {}
    number = snapshot.iteration or state.get("iter") or 0
    maximum = state.get("max", snapshot.maxIterations)
    shown = str(int(maximum)) if as_number(maximum) else "∞"
    return f"iteration {int(number)} of {shown}"


def spend(state: State | None, snapshot: Snapshot) -> tuple[int, int, float]:
    """Tokens in, tokens out and cost: the larger of the log's and ``state.json``'s."""
    tokens = snapshot.tokens
    in_tokens = int(as_number(tokens.get("input")) or 0)
    out_tokens = int(as_number(tokens.get("output")) or 0)
    cost = snapshot.costUsd
    recorded = (state or {}).get("spend")
    if isinstance(recorded, Mapping):
        stored = as_mapping(recorded.get("tokens"))
        in_tokens = max(in_tokens, int(as_number(stored.get("input")) or 0))
        out_tokens = max(out_tokens, int(as_number(stored.get("output")) or 0))
        cost = max(cost, as_number(recorded.get("costUsd")) or 0.0)
    return in_tokens, out_tokens, cost


def tokens_per_iteration(snapshot: Snapshot) -> list[float]:
    """Tokens (input + output) each finished iteration used, oldest first (newest 256).

    An iteration's use is the run's cumulative tokens at the next iteration's start
    (or now, for the last one) less those at its own start.
    """
    entries = snapshot.iterations

    def total(tokens: Any) -> float:
        return sum(as_number(value) or 0.0 for value in as_mapping(tokens).values())

    values: list[float] = []
    for index, entry in enumerate(entries):
        if entry.get("endedAt") is None:
            continue
        after = (
            total(entries[index + 1].get("tokensAtStart"))
            if index + 1 < len(entries)
            else total(snapshot.tokens)
        )
        values.append(max(0.0, after - total(entry.get("tokensAtStart"))))
    return values


def stage_marks(snapshot: Snapshot) -> list[tuple[str, str]]:
    """The stages row: ``(name, mark)`` with mark ``done``, ``active`` or ``todo``.

    From the current ``stage_plan`` (with its amendments); stages not in the plan
    that ran are shown too. Without a plan, the stages seen this iteration.
    """
    done = {str(stage.get("name")) for stage in snapshot.recentStages}
    active = str(snapshot.activeStage["name"]) if snapshot.activeStage else None
    plan = snapshot.currentPlan["stages"] if snapshot.currentPlan else []
    names: list[str] = [str(name) for name in plan]
    for name in [str(stage.get("name")) for stage in snapshot.recentStages] + [active or ""]:
        if name and name not in names:
            names.append(name)
    marks = []
    for name in names:
        mark = "active" if name == active else "done" if name in done else "todo"
        marks.append((name, mark))
    return marks


def substage_lines(snapshot: Snapshot, limit: int) -> list[str]:
    """The active stage's newest ``limit`` substages as ``verb args outcome duration``."""
    lines = []
    for sub in snapshot.currentStageSubstages[-limit:]:
        duration = fmt_duration(sub["durationMs"]) if as_number(sub.get("durationMs")) else ""
        bits = [sub.get("verb") or "·", sub.get("argsSummary") or "", sub.get("outcome") or ""]
        lines.append(" ".join(str(bit) for bit in [*bits, duration] if bit))
    return lines


def recent_stage_text(snapshot: Snapshot, limit: int = 4) -> str:
    """``ORIENT ok 45s · PLAN ok 1m02s`` for the newest finished stages."""
    parts = []
    for stage in snapshot.recentStages[-limit:]:
        outcome = f" {stage['outcome']}" if stage.get("outcome") else ""
        duration = (
            f" {fmt_duration(stage['durationMs'])}" if as_number(stage.get("durationMs")) else ""
        )
        parts.append(f"{stage.get('name')}{outcome}{duration}")
    return " · ".join(parts)


def task_marks(snapshot: Snapshot) -> list[tuple[str, str]]:
    """The current task list as ``(text, mark)``.

    Marks: ``ok``, ``fail``, ``skip``, ``active`` or ``todo``.
    """
    flight = snapshot.taskInFlight
    task_list = snapshot.currentTaskList
    finished = {
        (task.get("stage"), task.get("sub")): str(task.get("outcome"))
        for task in snapshot.recentTasks
    }
    rows: list[tuple[str, str]] = []
    if task_list:
        for index, item in enumerate(task_list["items"], start=1):
            key = (task_list["stage"], index)
            if flight and (flight["stage"], flight["sub"]) == key:
                mark = "active"
            else:
                mark = finished.get(key, "todo")
            rows.append((f"{index} {item}", mark))
        return rows
    for task in snapshot.recentTasks[-4:]:
        text = f"{task.get('stage')}.{task.get('sub')} {task.get('desc') or ''}"
        rows.append((text.strip(), str(task.get("outcome"))))
    if flight:
        rows.append((f"{flight['stage']}.{flight['sub']} {flight.get('desc') or ''}", "active"))
    return rows


_BACKLOG_ORDER = {"running": 0, "reopened": 1, "ready": 2, "blocked": 3}


def backlog_item_lines(items: Sequence[Mapping[str, Any]], limit: int = 6) -> list[tuple[str, str]]:
    """A backlog run's items as ``(text, status)``: open ones first, then the newest done."""
    open_items = [i for i in items if str(i.get("status")) in _BACKLOG_ORDER]
    open_items.sort(key=lambda i: _BACKLOG_ORDER[str(i.get("status"))])
    closed = [i for i in items if str(i.get("status")) not in _BACKLOG_ORDER]
    chosen = open_items[:limit]
    room = limit - len(chosen)
    if room > 0 and closed:
        chosen = closed[-room:] + chosen
    rows = []
    for item in chosen:
        item_id = str(item.get("id"))
        title = str(item.get("title") or item_id).removeprefix(f"{item_id}: ")
        text = item_id if title == item_id else f"{item_id} {title}"
        attempt = item.get("attempt")
        if isinstance(attempt, int) and attempt > 1:
            text += f" (attempt {attempt})"
        rows.append((text, str(item.get("status"))))
    return rows


def backlog_counts(items: Sequence[Mapping[str, Any]]) -> str:
    """``1 running · 2 ready · 1 completed`` for a backlog run's items."""
    return task_counts(items)


def work_item_lines(snapshot: Snapshot, limit: int = 3) -> list[tuple[str, str]]:
    """The active work item and the newest finished ones as ``(text, mark)``.

    A backlog run's items (``snapshot.workItems``) come with their status instead.
    """
    if snapshot.workItems:
        return backlog_item_lines(snapshot.workItems)

    def label(item: Mapping[str, Any]) -> str:
        ref = f" #{int(item['ref'])}" if as_number(item.get("ref")) is not None else ""
        return f"{item.get('kind')}{ref} {item.get('title') or ''}".strip()

    rows = [(label(item), "ok") for item in snapshot.completedWorkItems[-limit:]]
    if snapshot.activeWorkItem:
        rows.append((label(snapshot.activeWorkItem), "active"))
    return rows


def backlog_text(snapshot: Snapshot) -> str | None:
    """``3 issues · 1 PRs · 0 red CI · 4 closed`` from ``backlog_snapshot``."""
    backlog = snapshot.backlog
    if not backlog:
        return None
    parts = []
    for key, name in (("openIssues", "issues"), ("openPrs", "PRs"), ("redCi", "red CI")):
        if as_number(backlog.get(key)) is not None:
            parts.append(f"{int(backlog[key])} {name}")
    if snapshot.closedByLoop:
        parts.append(f"{int(snapshot.closedByLoop)} closed by the loop")
    return " · ".join(parts) or None


@dataclass(frozen=True)
class Panels:
    """Which of the live view's optional panels have something to show.

    Attributes:
        stages_row: A stage plan or a stage was reported.
        stage: A stage is active or has ended this iteration.
        work: Work items, a backlog, a task list or the project's tasks exist.
    """

    stages_row: bool
    stage: bool
    work: bool


def panels(snapshot: Snapshot, project_tasks: Sequence[Mapping[str, Any]]) -> Panels:
    """The panels worth their room: agents that report no stages or work items (most
    do not) leave the screen to the timeline and the agent's output."""
    return Panels(
        stages_row=bool(stage_marks(snapshot)),
        stage=bool(snapshot.activeStage or snapshot.recentStages),
        work=bool(
            work_item_lines(snapshot)
            or backlog_text(snapshot)
            or task_marks(snapshot)
            or project_tasks
        ),
    )


def project_task_lines(tasks: Sequence[Mapping[str, Any]], limit: int = 4) -> list[tuple[str, str]]:
    """Work items of ``.autopilot/tasks.jsonl`` (``docs/backlog.md``): running and ready first."""
    order = {"running": 0, "reopened": 1, "ready": 2, "blocked": 3}
    open_items = [task for task in tasks if str(task.get("status")) in order]
    open_items.sort(key=lambda task: order[str(task.get("status"))])
    rows = []
    for task in open_items[:limit]:
        status = str(task.get("status"))
        text = str(task.get("title") or task.get("prompt") or "").splitlines()
        rows.append((f"{task.get('id')} {text[0] if text else ''}".strip(), status))
    return rows


def task_counts(tasks: Sequence[Mapping[str, Any]]) -> str:
    """``2 ready · 1 running · 5 completed`` for ``tasks.jsonl``."""
    counts: dict[str, int] = {}
    for task in tasks:
        status = str(task.get("status") or "unknown")
        counts[status] = counts.get(status, 0) + 1
    return " · ".join(f"{count} {status}" for status, count in sorted(counts.items()))


def last_commit_text(snapshot: Snapshot) -> str | None:
    """``a1b2c3d subject (12:00:01)`` for the newest ``commit_observed``."""
    commit = snapshot.lastCommit
    if not commit:
        return None
    when = format_time(commit.get("ts"))[:8]
    return f"{str(commit['sha'])[:7]} {commit.get('subject') or ''}  ({when})"
