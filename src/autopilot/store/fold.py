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

from autopilot.core.structs import assign
from autopilot.core.text import utf16_units
from autopilot.core.vocabulary import SeedStatus
from autopilot.store.event_format import EVENT_TYPES, JS_NUMBER_LIMIT, SEED_EVENT_TYPES
from autopilot.store.fold_progress import (
    PROGRESS_HANDLERS,
    finite,
    nonempty_str,
    push,
)
from autopilot.store.snapshot import MAX_SNAPSHOT_HISTORY, Snapshot

TYPE_CHECKING = False  # as typing's; ``store.records`` (msgspec) loads on first use
if TYPE_CHECKING:
    from typing import Any

    from autopilot.store.records import Record

__all__ = ["MAX_SNAPSHOT_HISTORY", "Snapshot", "fold", "fold_event", "fold_lines", "fold_record"]


def fold(
    events: Iterable[Mapping[str, Any] | Record], snapshot: Snapshot | None = None
) -> Snapshot:
    """Fold events into a snapshot.

    Args:
        events: Accepted events, oldest first, as mappings (see ``read_events``) or
            records (see ``records.decode_record``).
        snapshot: A snapshot to continue from; it is copied, never changed.

    Returns:
        A new snapshot. ``fold(a + b) == fold(b, fold(a))``.
    """
    result = copy.deepcopy(snapshot) if snapshot is not None else Snapshot()
    for event in events:
        fold_event(result, event)
    return result


def fold_event(snap: Snapshot, event: Mapping[str, Any] | Record) -> None:
    """Apply one event to ``snap`` in place (the seed's ``foldEvent``).

    Only the seed's own types move ``updatedAt``: the seed reader skips lines of
    autopilot's types, and its snapshot must come out the same. An event given as a
    mapping is folded as its record would be (``records.record_of``: a type outside
    the vocabulary folds nothing, a field it lacks reads as None), without msgspec.
    """
    if not isinstance(event, Mapping):
        fold_record(snap, event)
        return
    kind = event.get("type")
    if not isinstance(kind, str) or kind not in _EVENT_TYPE_SET:
        return
    ts = event.get("ts")
    if kind in SEED_EVENT_TYPES and finite(ts):
        snap.updatedAt = ts
    handler = _HANDLERS.get(kind)
    if handler is not None:
        handler(snap, _Fields(event), ts)


class _Fields:
    """An event mapping read as its record: each field an attribute, None when absent.

    The handlers read only the fields their type folds (``records.FOLDED_FIELDS``),
    so a record and this view of the same event give them the same values.
    """

    __slots__ = ("_event",)

    def __init__(self, event: Mapping[str, Any]) -> None:
        self._event = event

    def __getattr__(self, name: str) -> Any:
        return self._event.get(name)


def fold_record(snap: Snapshot, record: Record) -> None:
    """``fold_event`` for a record (what the log readers decode lines into)."""
    ts = record.ts
    if record.seed and finite(ts):
        snap.updatedAt = ts
    handler = _HANDLERS.get(record.event_type)
    if handler is not None:
        handler(snap, record, ts)


def fold_lines(snap: Snapshot, lines: Iterable[bytes]) -> None:
    """Fold log lines (without their newlines) into ``snap`` in place, skipping the
    lines the seed reader skips; the same as folding ``read_events`` of them.

    This is the loop behind every read of a whole log: ``records.decode_record``
    written out inline, since it runs a million times for a million-event log.
    """
    from autopilot.store.records import DECODE_ERRORS, RECORD_DECODER, decode_record

    decode = RECORD_DECODER.decode
    by_class = _by_class()
    for line in lines:
        record: Record | None
        try:
            record = decode(line)
        except DECODE_ERRORS:
            record = decode_record(line)  # decided by the seed's rules, in Python
            if record is None:
                continue
            ts = record.ts
        else:  # records.accepted, inline
            ts = record.ts
            kind = type(ts)
            if kind is int:
                if not -JS_NUMBER_LIMIT < ts < JS_NUMBER_LIMIT:
                    continue
            elif kind is not float:  # msgspec decodes no NaN or infinity
                continue
            run_id = record.runId
            if type(run_id) is not str or not run_id:
                continue
        handler, seed = by_class[type(record)]
        if seed:
            snap.updatedAt = ts
        if handler is not None:
            handler(snap, record, ts)


def _armed(snap: Snapshot, e: Any, ts: Any) -> None:
    fresh = Snapshot()
    fresh.label = e.label if e.label is not None else snap.label
    fresh.maxIterations = e.maxIterations if e.maxIterations is not None else snap.maxIterations
    fresh.minIterations = e.minIterations if e.minIterations is not None else snap.minIterations
    fresh.runId = e.runId
    fresh.status = SeedStatus.RUNNING
    fresh.startedAt = ts
    fresh.updatedAt = ts
    fresh.agent = e.agent if isinstance(e.agent, str) else None
    fresh.model = e.model if isinstance(e.model, str) else None
    assign(snap, fresh)


def _iteration_start(snap: Snapshot, e: Any, ts: Any) -> None:
    number = e.iteration
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
    snap.status = SeedStatus.RUNNING
    snap.waitingUntil = None
    snap.activeStage = None
    snap.recentStages = []
    snap.currentStageSubstages = []
    snap.currentStageSubstagesDropped = 0


def _apply_usage(snap: Snapshot, e: Any) -> None:
    tokens = e.tokens
    if tokens:
        given = tokens if isinstance(tokens, Mapping) else {}
        snap.tokens = {
            "input": given["input"] if finite(given.get("input")) else snap.tokens["input"],
            "output": given["output"] if finite(given.get("output")) else snap.tokens["output"],
        }
    premium = e.premiumRequests
    if finite(premium) and premium >= 0:
        snap.premiumRequests = premium
    cost = e.costUsd
    if finite(cost) and cost >= 0:
        snap.costUsd = float(cost)


def _iteration_end(snap: Snapshot, e: Any, ts: Any) -> None:
    number = e.iteration
    if snap.iterations:
        last = snap.iterations[-1]
        if not finite(number) or number == last["iteration"]:
            last["endedAt"] = ts
            if isinstance(e.excerpt, str):
                last["excerpt"] = e.excerpt
            files = e.filesChanged
            if finite(files) and files >= 0:
                last["filesChanged"] = files
    if isinstance(e.excerpt, str):
        snap.lastExcerpt = e.excerpt
    _apply_usage(snap, e)
    outcome = e.outcome
    spent = e.iterationsSpent
    if finite(spent) and spent >= 0:
        snap.iterationsSpent = max(snap.iterationsSpent, int(spent))
    elif outcome != "rate_limited":
        snap.iterationsSpent += 1
    active = e.activeMs
    if finite(active) and active >= 0:
        snap.activeMs = max(snap.activeMs, active)
    if finite(number) and isinstance(outcome, str):
        snap.outcomes[str(int(number))] = outcome
        if len(snap.outcomes) > MAX_SNAPSHOT_HISTORY:
            del snap.outcomes[next(iter(snap.outcomes))]


def _usage_update(snap: Snapshot, e: Any, ts: Any) -> None:
    _apply_usage(snap, e)
    text = e.excerpt
    number = e.iteration
    if nonempty_str(text) and snap.iterations:
        last = snap.iterations[-1]
        if last["endedAt"] is None and (not finite(number) or number == last["iteration"]):
            last["excerpt"] = text
            snap.lastExcerpt = text


def _set_status(status: SeedStatus) -> Any:
    def handler(snap: Snapshot, e: Any, ts: Any) -> None:
        snap.status = status
        if status is SeedStatus.RUNNING:
            snap.waitingUntil = None

    return handler


def _stagnation(snap: Snapshot, e: Any, ts: Any) -> None:
    if finite(e.streak):
        snap.stagnationStreak = e.streak


def _terminal(status: SeedStatus) -> Any:
    def handler(snap: Snapshot, e: Any, ts: Any) -> None:
        snap.status = status
        if e.reason is not None:
            snap.reason = e.reason
        snap.terminalAt = ts
        snap.waitingUntil = None
        if isinstance(e.note, str):
            snap.note = e.note

    return handler


def _commit_observed(snap: Snapshot, e: Any, ts: Any) -> None:
    sha, subject = e.sha, e.subject
    if not nonempty_str(sha) or not nonempty_str(subject):
        return
    trailers = e.trailers
    kept = [t for t in trailers if nonempty_str(t)] if isinstance(trailers, list) else []
    snap.lastCommit = {"sha": sha, "subject": subject, "trailers": kept, "ts": ts}


def _session_attached(snap: Snapshot, e: Any, ts: Any) -> None:
    session = e.sessionId
    # The seed measures the length in UTF-16 code units (JS ``length``).
    if nonempty_str(session) and utf16_units(session) <= 64:
        snap.sessionId = session


def _rate_limited(snap: Snapshot, e: Any, ts: Any) -> None:
    until = e.waitingUntil
    snap.waitingUntil = until if finite(until) else None


def _budget_extended(snap: Snapshot, e: Any, ts: Any) -> None:
    ceiling = e.maxIterations
    if finite(ceiling) and ceiling > 0:
        snap.maxIterations = ceiling


def _restored(snap: Snapshot, e: Any, ts: Any) -> None:
    checkpoint, safety, files = e.checkpoint, e.safetyCheckpoint, e.filesChanged
    if not nonempty_str(checkpoint) or not nonempty_str(safety):
        return
    snap.lastRestore = {
        "checkpoint": checkpoint,
        "sha": e.sha if nonempty_str(e.sha) else None,
        "safetyCheckpoint": safety,
        "filesChanged": files if finite(files) else None,
        "ts": ts,
    }


_HANDLERS: dict[str, Any] = {
    "armed": _armed,
    "iteration_start": _iteration_start,
    "iteration_end": _iteration_end,
    "usage_update": _usage_update,
    "pause": _set_status(SeedStatus.PAUSED),
    "resume": _set_status(SeedStatus.RUNNING),
    "stagnation": _stagnation,
    "complete": _terminal(SeedStatus.COMPLETE),
    "abort": _terminal(SeedStatus.ABORTED),
    "commit_observed": _commit_observed,
    "session_attached": _session_attached,
    "rate_limited": _rate_limited,
    "budget_extended": _budget_extended,
    "restored": _restored,
    **PROGRESS_HANDLERS,
}

_EVENT_TYPE_SET = frozenset(EVENT_TYPES)

_BY_CLASS: dict[type[Record], tuple[Any, bool]] = {}


def _by_class() -> dict[type[Record], tuple[Any, bool]]:
    """Each record class's handler (None: nothing to fold) and whether it moves
    ``updatedAt``; built on first use, with ``store.records``."""
    if not _BY_CLASS:
        from autopilot.store.records import RECORD_CLASSES

        _BY_CLASS.update(
            (cls, (_HANDLERS.get(event_type), cls.seed))
            for event_type, cls in RECORD_CLASSES.items()
        )
    return _BY_CLASS
