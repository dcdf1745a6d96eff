"""``fold(events) -> Snapshot``: the whole picture of a run from its log alone.

The seed fields and their rules are the seed system's ``createInitialSnapshot`` /
``foldEvent`` (``docs/formats.md``, "Folding"), so a log folds to the same
seed fields here and in the seed's reader. autopilot adds fields of its own (cost,
agent, model, outcome of each iteration, rate-limit wait, terminal note), which the
seed reader never sees. Folding is deterministic and incremental: folding a prefix
and then the rest gives the same snapshot as folding the whole log.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from autopilot.store.events import SEED_EVENT_TYPES, utf16_units
from autopilot.store.fold_progress import (
    MAX_SNAPSHOT_HISTORY,
    PROGRESS_HANDLERS,
    finite,
    nonempty_str,
    push,
)


@dataclass
class Snapshot:
    """A run as its event log tells it.

    Seed fields (in the seed's key order) come first; ``tokens`` is the run's
    cumulative ``{"input", "output"}``; timestamps are epoch ms. autopilot's own
    fields follow: ``costUsd`` (cumulative USD), ``agent``, ``model``,
    ``waitingUntil`` (epoch ms while rate limited), ``note`` (the terminal note),
    ``outcomes`` (iteration number → outcome string, newest 256), ``workItems``
    (the backlog's items, ``{id, title, status, attempt}`` in file order, from
    ``workitem_recorded``, ``workitem_start``/``workitem_end`` with an ``itemId`` and
    ``backlog_snapshot.items``), and the spent ``iterationsSpent`` and ``activeMs``
    (cumulative, from ``iteration_end``; a log without them counts each
    ``iteration_end`` that was not a retried attempt).
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
    iterationsSpent: int = 0  # noqa: N815
    activeMs: int | float = 0  # noqa: N815

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
    if isinstance(kind, str) and kind in SEED_EVENT_TYPES and finite(ts):
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
    if finite(number):
        snap.iteration = number
        push(
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
            "input": given["input"] if finite(given.get("input")) else snap.tokens["input"],
            "output": given["output"] if finite(given.get("output")) else snap.tokens["output"],
        }
    premium = e.get("premiumRequests")
    if finite(premium) and premium >= 0:
        snap.premiumRequests = premium
    cost = e.get("costUsd")
    if finite(cost) and cost >= 0:
        snap.costUsd = float(cost)


def _iteration_end(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    number = e.get("iteration")
    if snap.iterations:
        last = snap.iterations[-1]
        if not finite(number) or number == last["iteration"]:
            last["endedAt"] = ts
            if isinstance(e.get("excerpt"), str):
                last["excerpt"] = e["excerpt"]
            files = e.get("filesChanged")
            if finite(files) and files >= 0:
                last["filesChanged"] = files
    if isinstance(e.get("excerpt"), str):
        snap.lastExcerpt = e["excerpt"]
    _apply_usage(snap, e)
    outcome = e.get("outcome")
    spent = e.get("iterationsSpent")
    if finite(spent) and spent >= 0:
        snap.iterationsSpent = max(snap.iterationsSpent, int(spent))
    elif outcome != "rate_limited":
        snap.iterationsSpent += 1
    active = e.get("activeMs")
    if finite(active) and active >= 0:
        snap.activeMs = max(snap.activeMs, active)
    if finite(number) and isinstance(outcome, str):
        snap.outcomes[str(int(number))] = outcome
        if len(snap.outcomes) > MAX_SNAPSHOT_HISTORY:
            del snap.outcomes[next(iter(snap.outcomes))]


def _usage_update(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    _apply_usage(snap, e)
    text = e.get("excerpt")
    number = e.get("iteration")
    if nonempty_str(text) and snap.iterations:
        last = snap.iterations[-1]
        if last["endedAt"] is None and (not finite(number) or number == last["iteration"]):
            last["excerpt"] = text
            snap.lastExcerpt = text


def _set_status(status: str) -> Any:
    def handler(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
        snap.status = status
        if status == "running":
            snap.waitingUntil = None

    return handler


def _stagnation(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    if finite(e.get("streak")):
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


def _commit_observed(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    sha, subject = e.get("sha"), e.get("subject")
    if not nonempty_str(sha) or not nonempty_str(subject):
        return
    trailers = e.get("trailers")
    kept = [t for t in trailers if nonempty_str(t)] if isinstance(trailers, list) else []
    snap.lastCommit = {"sha": sha, "subject": subject, "trailers": kept, "ts": ts}


def _session_attached(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    session = e.get("sessionId")
    # The seed measures the length in UTF-16 code units (JS ``length``).
    if nonempty_str(session) and utf16_units(session) <= 64:
        snap.sessionId = session


def _rate_limited(snap: Snapshot, e: Mapping[str, Any], ts: Any) -> None:
    until = e.get("waitingUntil")
    snap.waitingUntil = until if finite(until) else None


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
    "commit_observed": _commit_observed,
    "session_attached": _session_attached,
    "rate_limited": _rate_limited,
    **PROGRESS_HANDLERS,
}
