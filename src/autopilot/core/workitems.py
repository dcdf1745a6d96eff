"""Work items (``.autopilot/tasks.jsonl``): their shape, and the ready queue (pure).

One work item per line, in the shape ``docs/backlog.md`` documents::

    {"id": "unit-1", "status": "ready", "focus_layer": "micro", "depends_on": [],
     "prompt": "Implement unit 1", "acceptance_criteria": ["tests pass"],
     "allowed_surface": ["src/..."],
     "completion": {"state": "not_started", "verdict": null, "evidence": [],
                    "completion_check_digest": null, "reopen_target": null},
     "attempt": 0}

An acceptance criterion is a string (its id is ``ac1``, ``ac2``… by position) or an
object ``{"id", "text", "check"}`` whose ``check`` is a shell command that verifies
it. Only ``id`` is required; every other field has a default. Fields autopilot does
not know are kept, in order, on a round trip (``WorkItem.extra``).

The ready queue and what holds a backlog back are in ``core.ready_queue``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from autopilot.core.item_text import surface_problem, text_problem
from autopilot.core.structs import replace


class ItemStatus(StrEnum):
    """A work item's status (``docs/backlog.md``); the value is the JSON ``status``."""

    READY = "ready"
    RUNNING = "running"
    COMPLETED = "completed"
    REOPENED = "reopened"
    BLOCKED = "blocked"
    STOPPED = "stopped"
    NOT_APPLICABLE = "not_applicable"


OPEN_STATUSES = frozenset(
    {ItemStatus.READY, ItemStatus.RUNNING, ItemStatus.REOPENED, ItemStatus.BLOCKED}
)
"""An item in one of these still has work to do."""

SATISFYING_STATUSES = frozenset({ItemStatus.COMPLETED, ItemStatus.NOT_APPLICABLE})
"""A dependency in one of these no longer holds its dependents back."""


class FocusLayer(StrEnum):
    """How wide an item's work is (``focus_layer``, ``docs/backlog.md``)."""

    MICRO = "micro"
    MESO = "meso"
    MACRO = "macro"
    META = "meta"


class CompletionState(StrEnum):
    """Where an item's completion stands (``completion.state``)."""

    NOT_STARTED = "not_started"
    IN_PROGRESS = "in_progress"
    PASSED = "passed"
    FAILED = "failed"
    AWAITING_USER = "awaiting_user"
    STOPPED = "stopped"


class Verdict(StrEnum):
    """The outcome of an item's completion check (``completion.verdict``)."""

    PASS = "pass"
    FAIL = "fail"


REOPEN_TARGETS = (FocusLayer.MICRO, FocusLayer.MESO, FocusLayer.MACRO)

MAX_ID_CHARS = 64
MAX_SURFACE_VIOLATIONS = 20
"""How many paths outside its surface an item's record keeps (its line must stay short)."""
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
"""A work item id or criterion id: letters, digits, ``.``, ``_``, ``-``; 1–64 chars."""


class ItemFormatError(ValueError):
    """A ``tasks.jsonl`` value is not a work item; ``str()`` says which field and why."""


@dataclass(frozen=True)
class Criterion:
    """One acceptance criterion.

    Attributes:
        id: ``ac1``, ``ac2``… by position for a plain string, or the object's ``id``.
        text: What must hold.
        check: A shell command that verifies it (exit 0 = pass), or None.
        plain: True if it was written as a plain string (it is written back so).
    """

    id: str
    text: str
    check: str | None = None
    plain: bool = False

    def to_json(self) -> str | dict[str, Any]:
        """The criterion as it is written in ``tasks.jsonl``."""
        if self.plain:
            return self.text
        data: dict[str, Any] = {"id": self.id, "text": self.text}
        if self.check is not None:
            data["check"] = self.check
        return data


@dataclass(frozen=True)
class Completion:
    """An item's ``completion`` record (``docs/backlog.md``).

    Attributes:
        state: Where completion stands.
        verdict: ``pass``/``fail`` of the last completion check, or None.
        evidence: The evidence strings of the last report and check.
        completion_check_digest: ``sha256:<64 hex>`` of the checks that ran and
            what they printed, or None.
        reopen_target: ``micro``/``meso``/``macro`` when the item was reopened.
        feedback: What the next attempt must know (a failing check's output tail,
            a surface violation, the user's answer); autopilot's own field.
        surface_violations: Paths an attempt changed outside the allowed surface
            (at most ``MAX_SURFACE_VIOLATIONS``), kept on the record from the reopen
            they caused on, whatever the item's later attempts decide; autopilot's own
            field (``surface_violations`` in the file, only when there are some).
        extra: Unknown fields, kept.
    """

    state: CompletionState = CompletionState.NOT_STARTED
    verdict: Verdict | None = None
    evidence: tuple[str, ...] = ()
    completion_check_digest: str | None = None
    reopen_target: FocusLayer | None = None
    feedback: str | None = None
    surface_violations: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The record as written in ``tasks.jsonl``."""
        data: dict[str, Any] = {
            "state": self.state.value,
            "verdict": self.verdict.value if self.verdict else None,
            "evidence": list(self.evidence),
            "completion_check_digest": self.completion_check_digest,
            "reopen_target": self.reopen_target.value if self.reopen_target else None,
        }
        if self.feedback is not None:
            data["feedback"] = self.feedback
        if self.surface_violations:
            data["surface_violations"] = list(self.surface_violations)
        data.update({k: v for k, v in self.extra.items() if k not in data})
        return data


@dataclass(frozen=True)
class WorkItem:
    """One line of ``tasks.jsonl``.

    Attributes:
        id: Unique in the file (see ``ID_PATTERN``).
        status: Its status (``docs/backlog.md``).
        prompt: What the agent is asked to do.
        title: A short name for lists (autopilot's own field; optional).
        depends_on: Ids that must be completed (or not applicable) first.
        acceptance_criteria: What must hold for the item to count as done.
        allowed_surface: Paths (glob patterns) the item may change; empty: the run's.
        focus_layer: How wide the work is.
        completion: The completion record.
        attempt: How many times an iteration has worked on it.
        blocked_reason: Why it is blocked (a person's reason or the agent's
            question); autopilot's own field.
        extra: Unknown fields, kept in order on a round trip.
    """

    id: str
    status: ItemStatus = ItemStatus.READY
    prompt: str = ""
    title: str | None = None
    depends_on: tuple[str, ...] = ()
    acceptance_criteria: tuple[Criterion, ...] = ()
    allowed_surface: tuple[str, ...] = ()
    focus_layer: FocusLayer = FocusLayer.MICRO
    completion: Completion = field(default_factory=Completion)
    attempt: int = 0
    blocked_reason: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_open(self) -> bool:
        """True while the item still has work to do."""
        return self.status in OPEN_STATUSES

    def criterion(self, criterion_id: str) -> Criterion | None:
        """The criterion with this id, or None."""
        return next((c for c in self.acceptance_criteria if c.id == criterion_id), None)

    def label(self) -> str:
        """``id: title`` (or the prompt's first line) for lists and events."""
        text = self.title or next(iter(self.prompt.strip().splitlines()), "")
        return f"{self.id}: {text}" if text else self.id

    def with_status(self, status: ItemStatus, **changes: Any) -> WorkItem:
        """A copy with ``status`` and the other ``changes``."""
        return replace(self, status=status, **changes)

    def to_json(self) -> dict[str, Any]:
        """The item as one ``tasks.jsonl`` object (the addon's key order, then ours;
        ``docs/backlog.md``)."""
        data: dict[str, Any] = {"id": self.id, "status": self.status.value}
        if self.title is not None:
            data["title"] = self.title
        data.update(
            focus_layer=self.focus_layer.value,
            depends_on=list(self.depends_on),
            prompt=self.prompt,
            acceptance_criteria=[c.to_json() for c in self.acceptance_criteria],
            allowed_surface=list(self.allowed_surface),
            completion=self.completion.to_json(),
            attempt=self.attempt,
        )
        if self.blocked_reason is not None:
            data["blocked_reason"] = self.blocked_reason
        data.update({k: v for k, v in self.extra.items() if k not in data})
        return data


_ITEM_FIELDS = frozenset(
    {
        "id",
        "status",
        "title",
        "focus_layer",
        "depends_on",
        "prompt",
        "acceptance_criteria",
        "allowed_surface",
        "completion",
        "attempt",
        "blocked_reason",
    }
)
_COMPLETION_FIELDS = frozenset(
    {
        "state",
        "verdict",
        "evidence",
        "completion_check_digest",
        "reopen_target",
        "feedback",
        "surface_violations",
    }
)


def _choice(value: Any, kind: type[StrEnum], where: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise ItemFormatError(f"{where} must be one of {allowed}; got {value!r}") from None


def _text(value: Any, where: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ItemFormatError(f"{where} must be a string")
    if (problem := text_problem(value)) is not None:
        raise ItemFormatError(f"{where} has {problem}")
    return value


def _text_list(value: Any, where: str, check: Any = text_problem) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ItemFormatError(f"{where} must be a list of strings")
    for text in value:
        if (problem := check(text)) is not None:
            raise ItemFormatError(f"{where}: {problem}")
    return tuple(value)


def check_id(value: Any, where: str) -> str:
    """``value`` as an id.

    Raises:
        ItemFormatError: not a string matching ``ID_PATTERN``.
    """
    if not isinstance(value, str) or not ID_PATTERN.match(value):
        raise ItemFormatError(
            f"{where} must be 1-{MAX_ID_CHARS} letters, digits, '.', '_' or '-' "
            f"(starting with a letter or digit); got {value!r}"
        )
    return value


def _criteria(value: Any) -> tuple[Criterion, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ItemFormatError("acceptance_criteria must be a list")
    criteria: list[Criterion] = []
    for index, entry in enumerate(value, start=1):
        where = f"acceptance_criteria[{index - 1}]"
        if isinstance(entry, str):
            criteria.append(Criterion(f"ac{index}", entry, plain=True))
            continue
        if not isinstance(entry, Mapping):
            raise ItemFormatError(f"{where} must be a string or an object")
        criterion_id = check_id(entry.get("id", f"ac{index}"), f"{where}.id")
        text = _text(entry.get("text", ""), f"{where}.text") or ""
        check = _text(entry.get("check"), f"{where}.check", optional=True)
        if check is not None and not check.strip():
            check = None
        criteria.append(Criterion(criterion_id, text, check))
    seen: set[str] = set()
    for criterion in criteria:
        if criterion.id in seen:
            raise ItemFormatError(f"acceptance_criteria: criterion id {criterion.id!r} repeats")
        seen.add(criterion.id)
    return tuple(criteria)


def _completion(value: Any) -> Completion:
    if value is None:
        return Completion()
    if not isinstance(value, Mapping):
        raise ItemFormatError("completion must be an object")
    verdict = value.get("verdict")
    target = value.get("reopen_target")
    return Completion(
        state=_choice(value.get("state", "not_started"), CompletionState, "completion.state"),
        verdict=None if verdict is None else _choice(verdict, Verdict, "completion.verdict"),
        evidence=_text_list(value.get("evidence"), "completion.evidence"),
        completion_check_digest=_text(
            value.get("completion_check_digest"),
            "completion.completion_check_digest",
            optional=True,
        ),
        reopen_target=None
        if target is None
        else _choice(target, FocusLayer, "completion.reopen_target"),
        feedback=_text(value.get("feedback"), "completion.feedback", optional=True),
        surface_violations=_text_list(
            value.get("surface_violations"), "completion.surface_violations"
        ),
        extra={k: v for k, v in value.items() if k not in _COMPLETION_FIELDS},
    )


def item_from_json(data: Any) -> WorkItem:
    """Decode one ``tasks.jsonl`` object.

    Args:
        data: The parsed JSON value of one line.

    Returns:
        The work item; missing fields take their defaults.

    Raises:
        ItemFormatError: not an object, no valid ``id``, or a field of the wrong type
            or value (the message names the field).
    """
    if not isinstance(data, Mapping):
        raise ItemFormatError("a work item must be a JSON object")
    if "id" not in data:
        raise ItemFormatError("a work item needs an 'id'")
    attempt = data.get("attempt", 0)
    if isinstance(attempt, bool) or not isinstance(attempt, int) or not 0 <= attempt < 10**9:
        raise ItemFormatError("attempt must be a whole number from 0")
    return WorkItem(
        id=check_id(data["id"], "id"),
        status=_choice(data.get("status", "ready"), ItemStatus, "status"),
        prompt=_text(data.get("prompt", ""), "prompt") or "",
        title=_text(data.get("title"), "title", optional=True),
        depends_on=tuple(
            check_id(dep, "depends_on[]")
            for dep in _text_list(data.get("depends_on"), "depends_on")
        ),
        acceptance_criteria=_criteria(data.get("acceptance_criteria")),
        allowed_surface=_text_list(data.get("allowed_surface"), "allowed_surface", surface_problem),
        focus_layer=_choice(data.get("focus_layer", "micro"), FocusLayer, "focus_layer"),
        completion=_completion(data.get("completion")),
        attempt=attempt,
        blocked_reason=_text(data.get("blocked_reason"), "blocked_reason", optional=True),
        extra={k: v for k, v in data.items() if k not in _ITEM_FIELDS},
    )
