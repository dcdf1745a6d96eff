"""Lines an agent added to ``tasks.jsonl`` during its iteration that autopilot cannot
take: found (pure), then taken out of the file and kept aside in the run's folder.

While an agent works, autopilot owns the file (``core.backlog_step.reconcile`` undoes
what the agent changed in existing items). An item the agent adds in a valid shape
stays, ``ready``; a line that would hold the whole run until a person fixes the file,
or that would let an agent grant itself done work, is taken out instead:

* a line that is not a work item (not JSON, a field of the wrong type, too long);
* an item repeating an id an earlier line has;
* a new item that depends on an id the backlog does not have;
* a new item born in any status but ``ready``, or with a completion record of its
  own (a verdict, evidence, a digest, a state past ``not_started``).

At an iteration's start the file has none of these (a malformed line or a duplicate id
holds the run at the boundary), so every one found at its end is the iteration's. A
person's edit between iterations is never taken out: it pauses the run, with its line
number, until it is fixed.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from autopilot.core.workitems import CompletionState, ItemStatus, WorkItem
from autopilot.store.atomic import write_atomically
from autopilot.store.backlog import BacklogFile, MalformedLine, encode_item

REJECTED_FILE = "tasks-rejected.jsonl"
"""In the iteration's folder: the lines taken out, byte for byte, one per line."""


@dataclass(frozen=True)
class Rejected:
    """One line taken out of ``tasks.jsonl``.

    Attributes:
        index: Its entry's index in the ``BacklogFile`` as read.
        raw: The line's bytes (no newline).
        why: What is wrong with it, for people (``line 4: not valid JSON …``).
    """

    index: int
    raw: bytes
    why: str


def _born_open(item: WorkItem) -> bool:
    completion = item.completion
    return (
        item.status is ItemStatus.READY
        and completion.state is CompletionState.NOT_STARTED
        and completion.verdict is None
        and not completion.evidence
        and completion.completion_check_digest is None
    )


def invalid_additions(found: BacklogFile, known_ids: Collection[str]) -> list[Rejected]:
    """The lines of ``found`` an agent added that autopilot cannot take (see the
    module docstring), in file order.

    Args:
        found: ``tasks.jsonl`` as it is at the iteration's end.
        known_ids: The ids of the items autopilot knew at the iteration's start.
    """
    rejected: dict[int, str] = {}
    seen: set[str] = set()
    for index, entry in enumerate(found.entries):
        if isinstance(entry, MalformedLine):
            rejected[index] = f"line {entry.number}: {entry.error}"
            continue
        if entry.id in seen:
            rejected[index] = f"work item {entry.id!r} repeats an id an earlier line has"
            continue
        seen.add(entry.id)
        if entry.id not in known_ids and not _born_open(entry):
            rejected[index] = (
                f"new work item {entry.id!r} was added as {entry.status.value} or with a "
                "completion of its own (an added item starts ready, and only autopilot's "
                "checks complete it)"
            )
    # A new item that depends on an unknown id (or on a new item taken out) goes too.
    changed = True
    while changed:
        changed = False
        kept = {
            e.id
            for i, e in enumerate(found.entries)
            if i not in rejected and isinstance(e, WorkItem)
        }
        for index, entry in enumerate(found.entries):
            if index in rejected or not isinstance(entry, WorkItem) or entry.id in known_ids:
                continue
            unknown = [d for d in entry.depends_on if d not in kept]
            if unknown:
                rejected[index] = (
                    f"new work item {entry.id!r} depends on {', '.join(unknown)}, which the "
                    "backlog does not have"
                )
                changed = True
    return [Rejected(index, _raw(found, index), why) for index, why in sorted(rejected.items())]


def _raw(found: BacklogFile, index: int) -> bytes:
    entry = found.entries[index]
    if isinstance(entry, MalformedLine):
        return entry.raw
    line = found.line(index)
    return line if line is not None else encode_item(entry)


def without(found: BacklogFile, rejected: Collection[Rejected]) -> BacklogFile:
    """``found`` without the ``rejected`` lines; every other line as it was read."""
    drop = {r.index for r in rejected}
    keep = [i for i in range(len(found.entries)) if i not in drop]
    return BacklogFile(
        tuple(found.entries[i] for i in keep),
        exists=True,
        lines=tuple(found.line(i) for i in keep),
    )


def keep_aside(folder: Path, rejected: Collection[Rejected]) -> Path:
    """Append the ``rejected`` lines, byte for byte, to ``folder``'s
    ``REJECTED_FILE``; returns its path.

    Raises:
        OSError: the file could not be written.
    """
    path = folder / REJECTED_FILE
    before = path.read_bytes() if path.is_file() else b""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomically(path, before + b"".join(r.raw + b"\n" for r in rejected))
    return path
