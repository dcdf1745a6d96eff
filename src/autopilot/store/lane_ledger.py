"""What the lanes of a parallel run last wrote of each work item (``lane-items.json``).

The lanes share the checkout's ``tasks.jsonl``: while one lane's agent works, its
sibling lanes claim and conclude their own items in it. So at the end of a lane's
iteration a change to another item is either a sibling's write or the agent's (a
person's change is refused while a lane is in an iteration: ``cli.tasks_guard``). Each
lane notes every item it writes here, under the backlog's lock, with a number that
grows by one at each write: the version written after a lane claimed its item is a
sibling's; any other change to an item not its own is the agent's, and is undone
(``loop.backlog_end``).

The file, in the parallel run's folder: ``{"seq": n, "items": {"<id>": [seq, item]}}``
(``item``: the item as one ``tasks.jsonl`` object).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from autopilot.core.workitems import ItemFormatError, WorkItem, item_from_json
from autopilot.store.atomic import write_json_atomically
from autopilot.store.backlog import MAX_TASKS_FILE_BYTES
from autopilot.store.files import read_bounded_file

LEDGER_FILE = "lane-items.json"


class LaneLedger:
    """The parallel run's ``lane-items.json``; every call is made under the backlog's
    lock.

    Args:
        path: The file (``<parallel run folder>/lane-items.json``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> tuple[int, dict[str, tuple[int, WorkItem]]]:
        """``(seq, {item id: (seq it was written at, item)})``; ``(0, {})`` when the
        file is missing or not what autopilot writes."""
        try:
            data = json.loads(
                read_bounded_file(self.path, max_bytes=2 * MAX_TASKS_FILE_BYTES).decode("utf-8")
            )
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            return 0, {}
        if not isinstance(data, dict) or not isinstance(data.get("seq"), int):
            return 0, {}
        items: dict[str, tuple[int, WorkItem]] = {}
        listed = data.get("items")
        for key, entry in (listed if isinstance(listed, dict) else {}).items():
            if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], int):
                continue
            try:
                item = item_from_json(entry[1])
            except ItemFormatError:
                continue
            if item.id == key:
                items[key] = (entry[0], item)
        return int(data["seq"]), items

    def wrote(self, items: Sequence[WorkItem]) -> int:
        """Note that a lane wrote ``items``; returns the new seq (0 when the file could
        not be written: every later write then counts as a sibling's)."""
        seq, known = self.read()
        seq += 1
        listed = {key: [at, item.to_json()] for key, (at, item) in known.items()}
        for item in items:
            listed[item.id] = [seq, item.to_json()]
        try:
            write_json_atomically(self.path, {"seq": seq, "items": listed})
        except OSError:
            return 0
        return seq

    def accepted(
        self, ours: Sequence[WorkItem], found: Sequence[WorkItem], own: str, claimed_at: int
    ) -> tuple[WorkItem, ...]:
        """``found`` (the shared file at the end of a lane's iteration on ``own``) with
        each other item as the lanes accept it: as it was when the lane claimed ``own``
        (``ours``, at seq ``claimed_at``), or as a sibling lane wrote it since; an item
        added meanwhile as it is, one removed back at the end."""
        _, written = self.read()
        before = {item.id: item for item in ours}
        accepted: list[WorkItem] = []
        for now in found:
            then = before.get(now.id)
            at, sibling = written.get(now.id, (0, None))
            if now.id == own or then is None or now == then:
                accepted.append(now)
            elif sibling is not None and at > claimed_at:
                accepted.append(sibling)
            else:
                accepted.append(then)
        there = {item.id for item in found}
        accepted.extend(item for item in ours if item.id not in there and item.id != own)
        return tuple(accepted)
