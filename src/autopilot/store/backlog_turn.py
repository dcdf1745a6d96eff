"""The mark a backlog run leaves while an agent works on a work item.

While an iteration works on an item, the run undoes at its end every change made to
the items meanwhile (``core.backlog_step.reconcile``), so a person's ``autopilot tasks
block``/``edit``/… must be refused then, not accepted and undone. The run writes
``backlog-turn.json`` in its folder under the backlog's lock, in the same hold in which
it takes its copy of the items (``loop.backlog.BacklogShell.begin``), and removes it
once the iteration's end has written the file (``loop.backlog_end.end_item``); a
person's change checks for it under the same lock (``cli.tasks_cmds``), so one of the
two always sees the other. A hook run's mark lasts from the Stop that continues the
session to the next Stop.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from autopilot.store.atomic import write_atomically

TURN_FILE = "backlog-turn.json"


def mark_turn(run_folder: Path, iteration: int, item_id: str) -> None:
    """Note that iteration ``iteration`` works on ``item_id``; the caller holds the
    backlog's lock.

    Raises:
        OSError: the run's folder cannot be written.
    """
    data = json.dumps({"iteration": iteration, "itemId": item_id}).encode()
    write_atomically(run_folder / TURN_FILE, data)


def clear_turn(run_folder: Path) -> None:
    """Remove the mark (none is fine)."""
    with contextlib.suppress(OSError):
        (run_folder / TURN_FILE).unlink()


def turn_of(run_folder: Path) -> tuple[int, str] | None:
    """``(iteration, item id)`` of the marked turn, or None when none is marked."""
    try:
        data = json.loads((run_folder / TURN_FILE).read_bytes()[:4096])
        return int(data["iteration"]), str(data["itemId"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
