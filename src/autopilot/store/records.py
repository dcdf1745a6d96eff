"""Log lines decoded by msgspec (in C): as typed records for folding, or as dicts.

Each event type is a ``msgspec.Struct`` (tagged by ``type``) that holds only the
fields ``fold`` reads; a line's other fields are skipped unparsed. Every field is
``Any``: the seed's reader keeps a line whose fields have odd types and the fold
ignores those fields, so decoding must never refuse a line for them. The log format
is that of ``store.event_format``; a line is accepted by exactly the rules of
``event_format.parse_event_line`` (strict JSON object, a known ``type``, a finite number
``ts``, a non-empty string ``runId``): what msgspec cannot decode (a lone surrogate
escape, a number beyond a double, whitespace JSON does not allow) is decided by
``parse_event_line`` itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Union

import msgspec

from autopilot.store.event_format import (
    EVENT_TYPES,
    SEED_EVENT_TYPES,
    finite_number,
    parse_event_line,
)

FOLDED_FIELDS: dict[str, tuple[str, ...]] = {
    "armed": ("label", "maxIterations", "minIterations", "agent", "model"),
    "iteration_start": ("iteration",),
    "iteration_end": (
        "iteration",
        "excerpt",
        "filesChanged",
        "outcome",
        "tokens",
        "premiumRequests",
        "costUsd",
        "iterationsSpent",
        "activeMs",
    ),
    "usage_update": ("iteration", "excerpt", "tokens", "premiumRequests", "costUsd"),
    "stagnation": ("streak",),
    "complete": ("reason", "note"),
    "abort": ("reason", "note"),
    "stage_start": ("stage", "stageName"),
    "stage_end": ("stage", "stageName", "durationMs", "outcome"),
    "substage": ("sub", "verb", "argsSummary", "outcome", "durationMs"),
    "backlog_snapshot": (
        "redCi",
        "openPrs",
        "openIssues",
        "closedByLoop",
        "items",
        "itemsTruncated",
    ),
    "workitem_start": ("itemId", "title", "attempt", "kind", "ref"),
    "workitem_end": ("itemId", "title", "attempt", "status", "kind", "ref", "closesN"),
    "stage_plan": ("stages",),
    "stage_plan_amend": ("add", "remove", "after", "reason"),
    "task_list": ("stage", "items"),
    "task_start": ("stage", "sub", "desc"),
    "task_end": ("stage", "sub", "outcome", "durationMs"),
    "commit_observed": ("sha", "subject", "trailers"),
    "session_attached": ("sessionId",),
    "worktree_created": ("path", "branch", "baseRef", "iteration"),
    "worktree_removed": ("path",),
    "worktree_kept": ("path", "branch", "iteration"),
    "rate_limited": ("waitingUntil",),
    "workitem_recorded": ("itemId", "item"),
    "budget_extended": ("maxIterations",),
    "restored": ("checkpoint", "sha", "safetyCheckpoint", "filesChanged"),
}
"""The fields ``fold`` reads of each event type (other types: only ``ts``, ``runId``)."""


class Record(msgspec.Struct, tag_field="type"):
    """An event as ``fold`` sees it: ``ts``, ``runId`` and the fields it reads.

    Attributes:
        ts: Epoch milliseconds (whatever the line held; ``fold`` checks it).
        runId: The run's id.
    """

    event_type: ClassVar[str] = ""
    seed: ClassVar[bool] = False
    """Whether the seed's reader knows this type (only those move ``updatedAt``)."""

    ts: Any = None
    runId: Any = None  # noqa: N815 - the log's field name


def _record_class(event_type: str) -> type[Record]:
    fields = [(name, Any, None) for name in FOLDED_FIELDS.get(event_type, ())]
    cls = msgspec.defstruct(
        "Record_" + event_type,
        fields,
        bases=(Record,),
        tag=event_type,
        namespace={"event_type": event_type, "seed": event_type in SEED_EVENT_TYPES},
        module=__name__,
    )
    assert issubclass(cls, Record)
    return cls


_EVENT_TYPES = frozenset(EVENT_TYPES)
RECORD_CLASSES: dict[str, type[Record]] = {t: _record_class(t) for t in EVENT_TYPES}
"""Each event type's record class."""

RECORD_DECODER: msgspec.json.Decoder[Record] = msgspec.json.Decoder(
    Union[tuple(RECORD_CLASSES.values())]  # noqa: UP007
)
DECODE_ERRORS = (msgspec.MsgspecError, RecursionError)
"""What ``RECORD_DECODER`` raises for a line it cannot decode as a record (one nested
too deeply for it among them)."""


def decode_record(line: bytes) -> Record | None:
    """The line's event as a record, or None when the seed reader would skip the line.

    Args:
        line: One log line, with or without its newline.
    """
    try:
        record = RECORD_DECODER.decode(line)
    except DECODE_ERRORS:
        event = parse_event_line(line)
        return None if event is None else record_of(event)
    if not accepted(record):
        return None
    return record


def accepted(record: Record) -> bool:
    """The seed reader's checks of ``ts`` and ``runId`` on a decoded record.

    msgspec never decodes NaN or an infinity from JSON (it refuses the line); a huge
    integer is not finite to the seed's reader (``events.finite_number``).
    """
    if not finite_number(record.ts):
        return False
    run_id = record.runId
    return type(run_id) is str and run_id != ""


def record_of(event: Mapping[str, Any]) -> Record | None:
    """An event given as a mapping (e.g. from ``read_events``) as its record; None
    for a type that is not in the vocabulary."""
    kind = event.get("type")
    cls = RECORD_CLASSES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return None
    get = event.get
    return cls(**{name: get(name) for name in cls.__struct_fields__})


_DICT_DECODER = msgspec.json.Decoder()


def decode_event_line(line: bytes) -> dict[str, Any] | None:
    """``parse_event_line``, decoded by msgspec (several times faster than ``json``).

    Gives exactly what ``parse_event_line`` gives: what msgspec refuses (a lone
    surrogate escape, a number beyond a double, whitespace JSON does not allow) is
    decided by ``parse_event_line`` itself, and msgspec never decodes NaN or an
    infinity, so an accepted float is finite.
    """
    try:
        value = _DICT_DECODER.decode(line)
    except DECODE_ERRORS:
        return parse_event_line(line)
    if type(value) is not dict:
        return None
    if not finite_number(value.get("ts")):
        return None
    run_id = value.get("runId")
    if type(run_id) is not str or not run_id or value.get("type") not in _EVENT_TYPES:
        return None
    return value
