"""``fold(events) -> Snapshot``: the whole picture of a run from its log alone.

The seed fields and their rules are the seed system's ``createInitialSnapshot`` /
``foldEvent`` (``reference/seed-event-contract.md`` §4.3), so a log folds to the same
seed fields here and in the seed's reader. autopilot adds fields of its own (cost,
agent, model, outcome of each iteration, rate-limit wait, terminal note), which the
seed reader never sees. Folding is deterministic and incremental: folding a prefix
and then the rest gives the same snapshot as folding the whole log.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypeGuard

from autopilot.store.events import SEED_EVENT_TYPES, utf16_units

MAX_SNAPSHOT_HISTORY = 256
"""History lists keep the newest 256 entries (seed ``MAX_SNAPSHOT_HISTORY``)."""

WORKITEM_KINDS = frozenset({"issue", "pr", "red_ci"})
TASK_OUTCOMES = frozenset({"ok", "fail", "skip"})


_NUMBER = (int, float)


def _finite(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, _NUMBER) and not isinstance(value, bool) and math.isfinite(value)


def _nonempty_str(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and value != ""


def _push(history: list[Any], item: Any) -> int:
    """Append with the 256 cap; return how many entries were dropped."""
    history.append(item)
    overflow = len(history) - MAX_SNAPSHOT_HISTORY
    if overflow > 0:
        del history[:overflow]
        return overflow
    return 0


@dataclass
class Snapshot:
    """A run as its event log tells it.

    Seed fields (in the seed's key order) come first; ``tokens`` is the run's
    cumulative ``{"input", "output"}``; timestamps are epoch ms. autopilot's own
    fields follow: ``costUsd`` (cumulative USD), ``agent``, ``model``,
    ``waitingUntil`` (epoch ms while rate limited), ``note`` (the terminal note) and
    ``outcomes`` (iteration number → outcome string, newest 256) and ``workItems``
    (the backlog's items, ``{id, title, status, attempt}`` in file order, from
    ``workitem_recorded``, ``workitem_start``/``workitem_end`` with an ``itemId`` and
    ``backlog_snapshot.items``).
    """

    runId: str | None = None  # noqa: N815 - the seed's JSON field names
    label: str | None = None
    status: str = "idle"
    iteration: int | float = 0
    maxIterations: Any = None  # noqa: N815
    minIterations: Any = None  # noqa: N815
    stagnationStreak: int | float = 0  # noqa: N815
    reason: Any = None
    tokens: dict[str, Any] = field(default_factory=lambda: {"input": 0, "output": 0})
    premiumRequests: Any = None  # noqa: N815
    lastExcerpt: str | None = None  # noqa: N815
    startedAt: int | float | None = None  # noqa: N815
    updatedAt: int | float | None = None  # noqa: N815
    terminalAt: int | float | None = None  # noqa: N815
    sessionId: str | None = None  # noqa: N815
    iterations: list[dict[str, Any]] = field(default_factory=list)
    activeStage: dict[str, Any] | None = None  # noqa: N815
    recentStages: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    currentStageSubstages: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    backlog: dict[str, Any] | None = None
    activeWorkItem: dict[str, Any] | None = None  # noqa: N815
    completedWorkItems: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    closedByLoop: int | float = 0  # noqa: N815
    currentPlan: dict[str, Any] | None = None  # noqa: N815
    planAmendments: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    currentTaskList: dict[str, Any] | None = None  # noqa: N815
    taskInFlight: dict[str, Any] | None = None  # noqa: N815
    recentTasks: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    lastCommit: dict[str, Any] | None = None  # noqa: N815
    activeWorktree: dict[str, Any] | None = None  # noqa: N815
    keptWorktrees: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    keptWorktreeCount: int = 0  # noqa: N815
    currentStageSubstagesDropped: int = 0  # noqa: N815
    # autopilot's own fields.
    costUsd: float = 0.0  # noqa: N815
    agent: str | None = None
    model: str | None = None
    waitingUntil: int | float | None = None  # noqa: N815
    note: str | None = None
    outcomes: dict[str, str] = field(default_factory=dict)
    workItems: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815

    @property
    def terminal(self) -> bool:
        """True once a ``complete`` or ``abort`` event has been folded."""
        return self.status in ("complete", "aborted")

    def to_dict(self) -> dict[str, Any]:
        """The snapshot as plain JSON-able data."""
        return asdict(self)

    def seed_fields(self) -> dict[str, Any]:
        """Only the fields the seed system's reader has, in its key order."""
        data = asdict(self)
        return {key: data[key] for key in list(data)[:_SEED_FIELD_COUNT]}


_SEED_FIELD_COUNT = 33


def fold(events: Iterable[Mapping[str, Any]], snapshot: Snapshot | None = None) -> Snapshot:
    """Fold events into a snapshot.

    Args:
        events: Accepted events, oldest first (see ``read_events``).
        snapshot: A snapshot to continue from; it is copied, never changed.

    Returns:
        A new snapshot. ``fold(a + b) == fold(b, fold(a))``.
    """
    result = copy.deepcopy(snapshot) if snapshot is not None else Snapshot()
    for event in events:
        fold_event(result, event)
    return result


def fold_event(snap: Snapshot, event: Mapping[str, Any]) -> None:
    """Apply one event to ``snap`` in place (the seed's ``foldEvent``).

    Only the seed's own types move ``updatedAt``: the seed reader skips lines of
    autopilot's types, and its snapshot must come out the same.
    """
    kind = event.get("type")
    ts = event.get("ts")
    if isinstance(kind, str) and kind in SEED_EVENT_TYPES and _finite(ts):
        snap.updatedAt = ts
    handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
    if handler is not None:
        handler(snap, event, ts)


def _armed(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    fresh = Snapshot()
    fresh.label = e["label"] if e.get("label") is not None else snap.label
    fresh.maxIterations = (
        e["maxIterations"] if e.get("maxIterations") is not None else snap.maxIterations
    )
    fresh.minIterations = (
        e["minIterations"] if e.get("minIterations") is not None else snap.minIterations
    )
    fresh.runId = e.get("runId")
    fresh.status = "running"
    fresh.startedAt = ts
    fresh.updatedAt = ts
    fresh.agent = e.get("agent") if isinstance(e.get("agent"), str) else None
    fresh.model = e.get("model") if isinstance(e.get("model"), str) else None
    snap.__dict__.update(fresh.__dict__)


def _iteration_start(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    number = e.get("iteration")
    if _finite(number):
        snap.iteration = number
        _push(
            snap.iterations,
            {
                "iteration": number,
                "startedAt": ts,
                "endedAt": None,
                "excerpt": None,
                "tokensAtStart": dict(snap.tokens),
                "premiumAtStart": snap.premiumRequests,
            },
        )
    snap.status = "running"
    snap.waitingUntil = None
    snap.activeStage = None
    snap.recentStages = []
    snap.currentStageSubstages = []
    snap.currentStageSubstagesDropped = 0


def _apply_usage(snap: Snapshot, e: Mapping[str, Any]) -> None:
    tokens = e.get("tokens")
    if tokens:
        given = tokens if isinstance(tokens, Mapping) else {}
        snap.tokens = {
            "input": given["input"] if _finite(given.get("input")) else snap.tokens["input"],
            "output": given["output"] if _finite(given.get("output")) else snap.tokens["output"],
        }
    premium = e.get("premiumRequests")
    if _finite(premium) and premium >= 0:
        snap.premiumRequests = premium
    cost = e.get("costUsd")
    if _finite(cost) and cost >= 0:
        snap.costUsd = float(cost)


def _iteration_end(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    number = e.get("iteration")
    if snap.iterations:
        last = snap.iterations[-1]
        if not _finite(number) or number == last["iteration"]:
            last["endedAt"] = ts
            if isinstance(e.get("excerpt"), str):
                last["excerpt"] = e["excerpt"]
            files = e.get("filesChanged")
            if _finite(files) and files >= 0:
                last["filesChanged"] = files
    if isinstance(e.get("excerpt"), str):
        snap.lastExcerpt = e["excerpt"]
    _apply_usage(snap, e)
    outcome = e.get("outcome")
    if _finite(number) and isinstance(outcome, str):
        snap.outcomes[str(int(number))] = outcome
        if len(snap.outcomes) > MAX_SNAPSHOT_HISTORY:
            del snap.outcomes[next(iter(snap.outcomes))]


def _usage_update(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    _apply_usage(snap, e)
    text = e.get("excerpt")
    number = e.get("iteration")
    if _nonempty_str(text) and snap.iterations:
        last = snap.iterations[-1]
        if last["endedAt"] is None and (not _finite(number) or number == last["iteration"]):
            last["excerpt"] = text
            snap.lastExcerpt = text


def _set_status(status: str) -> Any:
    def handler(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
        snap.status = status
        if status == "running":
            snap.waitingUntil = None

    return handler


def _stagnation(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    if _finite(e.get("streak")):
        snap.stagnationStreak = e["streak"]


def _terminal(status: str) -> Any:
    def handler(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
        snap.status = status
        if e.get("reason") is not None:
            snap.reason = e["reason"]
        snap.terminalAt = ts
        snap.waitingUntil = None
        if isinstance(e.get("note"), str):
            snap.note = e["note"]

    return handler


def _stage_start(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    stage = e.get("stage")
    if not _finite(stage):
        return
    name = e["stageName"] if _nonempty_str(e.get("stageName")) else f"STAGE_{stage}"
    snap.activeStage = {"stage": stage, "name": name, "startedAt": ts}
    snap.currentStageSubstages = []
    snap.currentStageSubstagesDropped = 0
    snap.currentTaskList = None
    snap.taskInFlight = None


def _stage_end(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    stage = e.get("stage")
    if not _finite(stage):
        return
    active = snap.activeStage
    matches = active is not None and active["stage"] == stage
    if _nonempty_str(e.get("stageName")):
        name = e["stageName"]
    elif matches and active is not None:
        name = active["name"]
    else:
        name = f"STAGE_{stage}"
    started = active["startedAt"] if matches and active is not None else None
    duration = e.get("durationMs")
    if not _finite(duration):
        duration = ts - started if _finite(started) and _finite(ts) else None
    outcome = e.get("outcome") if isinstance(e.get("outcome"), str) else None
    _push(
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


def _substage(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    sub = e.get("sub")
    if not _finite(sub):
        return
    entry = {
        "sub": sub,
        "ts": ts,
        "verb": _str_or_none(e.get("verb")),
        "argsSummary": _str_or_none(e.get("argsSummary")),
        "outcome": _str_or_none(e.get("outcome")),
        "durationMs": e["durationMs"] if _finite(e.get("durationMs")) else None,
    }
    snap.currentStageSubstagesDropped += _push(snap.currentStageSubstages, entry)


def _num_or_none(value: Any) -> Any:
    return value if _finite(value) else None


def _backlog_snapshot(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    snap.backlog = {
        key: _num_or_none(e.get(key)) for key in ("redCi", "openPrs", "openIssues", "closedByLoop")
    }
    listed = e.get("items")
    if not isinstance(listed, list):
        return
    known = {item["id"]: item for item in snap.workItems}
    items = []
    for entry in listed[:MAX_SNAPSHOT_HISTORY]:
        if isinstance(entry, Mapping) and _nonempty_str(entry.get("id")):
            item = dict(known.get(entry["id"]) or {"id": entry["id"], "title": None})
            _set_work_item(item, entry.get("status"), entry.get("attempt"))
            items.append(item)
    if not e.get("itemsTruncated"):
        snap.workItems = items


def _set_work_item(item: dict[str, Any], status: Any, attempt: Any) -> None:
    if isinstance(status, str) and status:
        item["status"] = status[:32]
    if _finite(attempt) and attempt >= 0:
        item["attempt"] = int(attempt)
    item.setdefault("status", None)
    item.setdefault("attempt", 0)


def _work_item(snap: Snapshot, e: Mapping[str, Any], status: Any) -> None:
    """Our own tracking of a backlog item named by ``itemId`` (seed readers skip it)."""
    item_id = e.get("itemId")
    if not _nonempty_str(item_id):
        return
    item = next((i for i in snap.workItems if i["id"] == item_id), None)
    if item is None:
        item = {"id": item_id, "title": None}
        _push(snap.workItems, item)
    if _nonempty_str(e.get("title")):
        item["title"] = e["title"]
    _set_work_item(item, status, e.get("attempt"))


def _workitem_recorded(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    record = e.get("item")
    if not isinstance(record, Mapping) or record.get("id") != e.get("itemId"):
        return
    title = record.get("title") or record.get("prompt")
    first = str(title).strip().splitlines()[0] if isinstance(title, str) and title.strip() else ""
    label = f"{e['itemId']}: {first}" if first else str(e["itemId"])
    _work_item(
        snap, {**e, "title": label[:200], "attempt": record.get("attempt")}, record.get("status")
    )


def _workitem_start(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    _work_item(snap, e, "running")
    kind = e.get("kind")
    if not isinstance(kind, str) or kind not in WORKITEM_KINDS:
        return
    snap.activeWorkItem = {
        "kind": kind,
        "ref": _num_or_none(e.get("ref")),
        "title": e["title"] if _nonempty_str(e.get("title")) else None,
        "startedAt": ts,
    }
    snap.currentPlan = None
    snap.currentTaskList = None
    snap.taskInFlight = None


def _workitem_end(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    _work_item(snap, e, e.get("status"))
    kind = e.get("kind")
    if not isinstance(kind, str) or kind not in WORKITEM_KINDS:
        return
    ref = e.get("ref")
    active = snap.activeWorkItem
    matches = (
        active is not None and active["kind"] == kind and (not _finite(ref) or ref == active["ref"])
    )
    title = e.get("title") if _nonempty_str(e.get("title")) else None
    if title is None and matches and active is not None:
        title = active["title"]
    closes = e.get("closesN")
    _push(
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
    if _finite(closes):
        snap.closedByLoop += 1
    if matches:
        snap.activeWorkItem = None


def _stage_plan(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    stages = e.get("stages")
    kept = [s for s in stages if _nonempty_str(s)] if isinstance(stages, list) else []
    if kept:
        snap.currentPlan = {"stages": kept, "setAt": ts}


def _stage_plan_amend(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    add = e.get("add") if _nonempty_str(e.get("add")) else None
    remove = e.get("remove") if _nonempty_str(e.get("remove")) else None
    if add is None and remove is None:
        return
    after = e.get("after") if _nonempty_str(e.get("after")) else None
    reason = e.get("reason") if isinstance(e.get("reason"), str) else ""
    _push(
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


def _task_list(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    stage, items = e.get("stage"), e.get("items")
    if not _nonempty_str(stage) or not isinstance(items, list):
        return
    kept = [item for item in items if _nonempty_str(item)]
    snap.currentTaskList = {"stage": stage, "items": kept, "setAt": ts}


def _task_start(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    stage, sub = e.get("stage"), e.get("sub")
    if not _nonempty_str(stage) or not _finite(sub):
        return
    desc = e.get("desc") if isinstance(e.get("desc"), str) else ""
    snap.taskInFlight = {"stage": stage, "sub": sub, "desc": desc, "startedAt": ts}


def _task_end(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    stage, sub, outcome = e.get("stage"), e.get("sub"), e.get("outcome")
    if not _nonempty_str(stage) or not _finite(sub):
        return
    if not isinstance(outcome, str) or outcome not in TASK_OUTCOMES:
        return
    flight = snap.taskInFlight
    matches = flight is not None and flight["stage"] == stage and flight["sub"] == sub
    started = flight["startedAt"] if matches and flight is not None else None
    duration = e.get("durationMs")
    if not _finite(duration):
        duration = ts - started if _finite(started) and _finite(ts) else None
    _push(
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


def _commit_observed(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    sha, subject = e.get("sha"), e.get("subject")
    if not _nonempty_str(sha) or not _nonempty_str(subject):
        return
    trailers = e.get("trailers")
    kept = [t for t in trailers if _nonempty_str(t)] if isinstance(trailers, list) else []
    snap.lastCommit = {"sha": sha, "subject": subject, "trailers": kept, "ts": ts}


def _session_attached(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    session = e.get("sessionId")
    # The seed measures the length in UTF-16 code units (JS ``length``).
    if _nonempty_str(session) and utf16_units(session) <= 64:
        snap.sessionId = session


def _worktree_created(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    path, branch = e.get("path"), e.get("branch")
    if not _nonempty_str(path) or not _nonempty_str(branch):
        return
    snap.activeWorktree = {
        "path": path,
        "branch": branch,
        "baseRef": e["baseRef"] if _nonempty_str(e.get("baseRef")) else None,
        "iteration": _num_or_none(e.get("iteration")),
        "startedAt": ts,
    }


def _worktree_removed(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    if snap.activeWorktree is not None and snap.activeWorktree["path"] == e.get("path"):
        snap.activeWorktree = None


def _worktree_kept(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    path, branch = e.get("path"), e.get("branch")
    if not _nonempty_str(path) or not _nonempty_str(branch):
        return
    _push(
        snap.keptWorktrees,
        {"path": path, "branch": branch, "iteration": _num_or_none(e.get("iteration")), "ts": ts},
    )
    snap.keptWorktreeCount += 1
    if snap.activeWorktree is not None and snap.activeWorktree["path"] == path:
        snap.activeWorktree = None


def _rate_limited(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    until = e.get("waitingUntil")
    snap.waitingUntil = until if _finite(until) else None


_HANDLERS: dict[str, Any] = {
    "armed": _armed,
    "iteration_start": _iteration_start,
    "iteration_end": _iteration_end,
    "usage_update": _usage_update,
    "pause": _set_status("paused"),
    "resume": _set_status("running"),
    "stagnation": _stagnation,
    "complete": _terminal("complete"),
    "abort": _terminal("aborted"),
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
    "commit_observed": _commit_observed,
    "session_attached": _session_attached,
    "worktree_created": _worktree_created,
    "worktree_removed": _worktree_removed,
    "worktree_kept": _worktree_kept,
    "rate_limited": _rate_limited,
    "workitem_recorded": _workitem_recorded,
}
