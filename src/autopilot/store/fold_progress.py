"""The fold of progress markers: stages, substages, tasks, plans, work items, the
backlog and worktrees (the Node tool's ``foldEvent`` rules for them, plus work items
by id; ``docs/formats.md``, "Folding"). ``store.fold`` folds the rest."""

from __future__ import annotations

from collections.abc import Mapping

from autopilot.store.event_format import finite_number
from autopilot.store.snapshot import MAX_SNAPSHOT_HISTORY, Snapshot

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any, TypeGuard

WORKITEM_KINDS = frozenset({"issue", "pr", "red_ci"})
TASK_OUTCOMES = frozenset({"ok", "fail", "skip"})

finite = finite_number
"""A JSON number that the Node tool's reader reads as finite (not a bool)."""


def nonempty_str(value: Any) -> TypeGuard[str]:
    """A string with at least one character."""
    return isinstance(value, str) and value != ""


def push(history: list[Any], item: Any) -> int:
    """Append with the 256 cap; return how many entries were dropped."""
    history.append(item)
    overflow = len(history) - MAX_SNAPSHOT_HISTORY
    if overflow > 0:
        del history[:overflow]
        return overflow
    return 0


def _stage_start(snap: Snapshot, e: Any, ts: Any) -> None:
    stage = e.stage
    if not finite(stage):
        return
    name = e.stageName if nonempty_str(e.stageName) else f"STAGE_{stage}"
    snap.activeStage = {"stage": stage, "name": name, "startedAt": ts}
    snap.currentStageSubstages = []
    snap.currentStageSubstagesDropped = 0
    snap.currentTaskList = None
    snap.taskInFlight = None


def _stage_end(snap: Snapshot, e: Any, ts: Any) -> None:
    stage = e.stage
    if not finite(stage):
        return
    active = snap.activeStage
    matches = active is not None and active["stage"] == stage
    if nonempty_str(e.stageName):
        name = e.stageName
    elif matches and active is not None:
        name = active["name"]
    else:
        name = f"STAGE_{stage}"
    started = active["startedAt"] if matches and active is not None else None
    duration = e.durationMs
    if not finite(duration):
        duration = ts - started if finite(started) and finite(ts) else None
    outcome = e.outcome if isinstance(e.outcome, str) else None
    push(
        snap.recentStages,
        {
            "stage": stage,
            "name": name,
            "startedAt": started,
            "endedAt": ts,
            "durationMs": duration,
            "outcome": outcome,
        },
    )
    if matches:
        snap.activeStage = None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _substage(snap: Snapshot, e: Any, ts: Any) -> None:
    sub = e.sub
    if not finite(sub):
        return
    # The most frequent event of a log: its checks are written out.
    verb, summary, outcome, duration = e.verb, e.argsSummary, e.outcome, e.durationMs
    entry = {
        "sub": sub,
        "ts": ts,
        "verb": verb if isinstance(verb, str) else None,
        "argsSummary": summary if isinstance(summary, str) else None,
        "outcome": outcome if isinstance(outcome, str) else None,
        "durationMs": duration if finite(duration) else None,
    }
    snap.currentStageSubstagesDropped += push(snap.currentStageSubstages, entry)


def _num_or_none(value: Any) -> Any:
    return value if finite(value) else None


def _backlog_snapshot(snap: Snapshot, e: Any, ts: Any) -> None:
    snap.backlog = {
        key: _num_or_none(getattr(e, key))
        for key in ("redCi", "openPrs", "openIssues", "closedByLoop")
    }
    listed = e.items
    if not isinstance(listed, list):
        return
    known = {item["id"]: item for item in snap.workItems}
    items = []
    for entry in listed[:MAX_SNAPSHOT_HISTORY]:
        if isinstance(entry, Mapping) and nonempty_str(entry.get("id")):
            item = dict(known.get(entry["id"]) or {"id": entry["id"], "title": None})
            _set_work_item(item, entry.get("status"), entry.get("attempt"))
            items.append(item)
    if not e.itemsTruncated:
        snap.workItems = items


def _set_work_item(item: dict[str, Any], status: Any, attempt: Any) -> None:
    if isinstance(status, str) and status:
        item["status"] = status[:32]
    if finite(attempt) and attempt >= 0:
        item["attempt"] = int(attempt)
    item.setdefault("status", None)
    item.setdefault("attempt", 0)


def _work_item(snap: Snapshot, item_id: Any, title: Any, attempt: Any, status: Any) -> None:
    """Our own tracking of a backlog item named by ``itemId`` (seed readers skip it)."""
    if not nonempty_str(item_id):
        return
    item = next((i for i in snap.workItems if i["id"] == item_id), None)
    if item is None:
        item = {"id": item_id, "title": None}
        push(snap.workItems, item)
    if nonempty_str(title):
        item["title"] = title
    _set_work_item(item, status, attempt)


def _workitem_recorded(snap: Snapshot, e: Any, ts: Any) -> None:
    record = e.item
    if not isinstance(record, Mapping) or record.get("id") != e.itemId:
        return
    title = record.get("title") or record.get("prompt")
    first = str(title).strip().splitlines()[0] if isinstance(title, str) and title.strip() else ""
    label = f"{e.itemId}: {first}" if first else str(e.itemId)
    _work_item(snap, e.itemId, label[:200], record.get("attempt"), record.get("status"))


def _workitem_start(snap: Snapshot, e: Any, ts: Any) -> None:
    _work_item(snap, e.itemId, e.title, e.attempt, "running")
    kind = e.kind
    if not isinstance(kind, str) or kind not in WORKITEM_KINDS:
        return
    snap.activeWorkItem = {
        "kind": kind,
        "ref": _num_or_none(e.ref),
        "title": e.title if nonempty_str(e.title) else None,
        "startedAt": ts,
    }
    snap.currentPlan = None
    snap.currentTaskList = None
    snap.taskInFlight = None


def _workitem_end(snap: Snapshot, e: Any, ts: Any) -> None:
    _work_item(snap, e.itemId, e.title, e.attempt, e.status)
    kind = e.kind
    if not isinstance(kind, str) or kind not in WORKITEM_KINDS:
        return
    ref = e.ref
    active = snap.activeWorkItem
    matches = (
        active is not None and active["kind"] == kind and (not finite(ref) or ref == active["ref"])
    )
    title = e.title if nonempty_str(e.title) else None
    if title is None and matches and active is not None:
        title = active["title"]
    closes = e.closesN
    push(
        snap.completedWorkItems,
        {
            "kind": kind,
            "ref": _num_or_none(ref),
            "title": title,
            "startedAt": active["startedAt"] if matches and active is not None else None,
            "endedAt": ts,
            "closesN": _num_or_none(closes),
        },
    )
    if finite(closes):
        snap.closedByLoop += 1
    if matches:
        snap.activeWorkItem = None


def _stage_plan(snap: Snapshot, e: Any, ts: Any) -> None:
    stages = e.stages
    kept = [s for s in stages if nonempty_str(s)] if isinstance(stages, list) else []
    if kept:
        snap.currentPlan = {"stages": kept, "setAt": ts}


def _stage_plan_amend(snap: Snapshot, e: Any, ts: Any) -> None:
    add = e.add if nonempty_str(e.add) else None
    remove = e.remove if nonempty_str(e.remove) else None
    if add is None and remove is None:
        return
    after = e.after if nonempty_str(e.after) else None
    reason = e.reason if isinstance(e.reason, str) else ""
    push(
        snap.planAmendments,
        {"add": add, "remove": remove, "after": after, "reason": reason, "ts": ts},
    )
    plan = snap.currentPlan
    if plan is None:
        return
    stages = list(plan["stages"])
    if remove is not None and remove in stages:
        stages.remove(remove)
    if add is not None:
        if after is not None and after in stages:
            stages.insert(stages.index(after) + 1, add)
        else:
            stages.append(add)
    snap.currentPlan = {"stages": stages, "setAt": ts}


def _task_list(snap: Snapshot, e: Any, ts: Any) -> None:
    stage, items = e.stage, e.items
    if not nonempty_str(stage) or not isinstance(items, list):
        return
    kept = [item for item in items if nonempty_str(item)]
    snap.currentTaskList = {"stage": stage, "items": kept, "setAt": ts}


def _task_start(snap: Snapshot, e: Any, ts: Any) -> None:
    stage, sub = e.stage, e.sub
    if not nonempty_str(stage) or not finite(sub):
        return
    desc = e.desc if isinstance(e.desc, str) else ""
    snap.taskInFlight = {"stage": stage, "sub": sub, "desc": desc, "startedAt": ts}


def _task_end(snap: Snapshot, e: Any, ts: Any) -> None:
    stage, sub, outcome = e.stage, e.sub, e.outcome
    if not nonempty_str(stage) or not finite(sub):
        return
    if not isinstance(outcome, str) or outcome not in TASK_OUTCOMES:
        return
    flight = snap.taskInFlight
    matches = flight is not None and flight["stage"] == stage and flight["sub"] == sub
    started = flight["startedAt"] if matches and flight is not None else None
    duration = e.durationMs
    if not finite(duration):
        duration = ts - started if finite(started) and finite(ts) else None
    push(
        snap.recentTasks,
        {
            "stage": stage,
            "sub": sub,
            "desc": flight["desc"] if matches and flight is not None else None,
            "outcome": outcome,
            "durationMs": duration,
            "startedAt": started,
            "endedAt": ts,
        },
    )
    if matches:
        snap.taskInFlight = None


def _worktree_created(snap: Snapshot, e: Any, ts: Any) -> None:
    path, branch = e.path, e.branch
    if not nonempty_str(path) or not nonempty_str(branch):
        return
    snap.activeWorktree = {
        "path": path,
        "branch": branch,
        "baseRef": e.baseRef if nonempty_str(e.baseRef) else None,
        "iteration": _num_or_none(e.iteration),
        "startedAt": ts,
    }


def _worktree_removed(snap: Snapshot, e: Any, ts: Any) -> None:
    if snap.activeWorktree is not None and snap.activeWorktree["path"] == e.path:
        snap.activeWorktree = None


def _worktree_kept(snap: Snapshot, e: Any, ts: Any) -> None:
    path, branch = e.path, e.branch
    if not nonempty_str(path) or not nonempty_str(branch):
        return
    push(
        snap.keptWorktrees,
        {"path": path, "branch": branch, "iteration": _num_or_none(e.iteration), "ts": ts},
    )
    snap.keptWorktreeCount += 1
    if snap.activeWorktree is not None and snap.activeWorktree["path"] == path:
        snap.activeWorktree = None


PROGRESS_HANDLERS: dict[str, Any] = {
    "stage_start": _stage_start,
    "stage_end": _stage_end,
    "substage": _substage,
    "backlog_snapshot": _backlog_snapshot,
    "workitem_start": _workitem_start,
    "workitem_end": _workitem_end,
    "stage_plan": _stage_plan,
    "stage_plan_amend": _stage_plan_amend,
    "task_list": _task_list,
    "task_start": _task_start,
    "task_end": _task_end,
    "worktree_created": _worktree_created,
    "worktree_removed": _worktree_removed,
    "worktree_kept": _worktree_kept,
    "workitem_recorded": _workitem_recorded,
}
"""Handlers of the progress-marker event types, by type."""
