"""Checks that always outlast a Stop (the CLI's hook timeout, ``hook install``'s 600 s).

A Stop killed while it ends an iteration is ended by the next Stop, which runs the
item's checks (and the final evidence gate) again (``hook.cut_short``): checks that
always take longer than the hook may run would cut every Stop short at the same point,
uncharged, forever. So a backlog run's Stop keeps ``stop-busy.json`` in the run's
folder while it works (``mark_busy``) and removes it when it answers (``busy_done``);
the next Stop counts the Stops cut short in a row at its point (``cut_short_before``).
After ``GIVE_UP_AFTER`` of them, ``hook.iteration`` runs no check there: the open
iteration ends without them, charged, and the run asks a person (``ask_person``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

from autopilot.core.vocabulary import EventType, RunStatus
from autopilot.loop.record import RunRecord
from autopilot.store.atomic import write_atomically
from autopilot.store.run_state import RunState

BUSY_FILE = "stop-busy.json"
"""In a backlog run's folder while a Stop works (``{"iteration": 3, "open": true,
"cutShort": 1}``): found by the next Stop, it says the one before was cut short."""

GIVE_UP_AFTER = 2
"""Stops cut short in a row at the same point (an iteration's end, or the boundary
after it) before the next one gives up on the checks there and asks a person."""


def cut_short_before(run_folder: Path, iteration: int, open_: bool) -> int:
    """How many Stops in a row were cut short at this point (iteration ``iteration``,
    open or not) before this one, from the busy file they left (0: none, or it was
    left at another point)."""
    try:
        raw = json.loads((run_folder / BUSY_FILE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return 0
    if not isinstance(raw, dict) or raw.get("iteration") != iteration:
        return 0
    if raw.get("open") is not open_:
        return 0
    return (_count(raw.get("cutShort"))) + 1


def mark_busy(run_folder: Path, iteration: int, open_: bool, cut_short: int) -> None:
    """Write the busy file for this Stop at this point; a file that cannot be written
    only loses the count (the Stop goes on)."""
    data = {"iteration": iteration, "open": open_, "cutShort": cut_short}
    with contextlib.suppress(OSError):
        write_atomically(run_folder / BUSY_FILE, json.dumps(data).encode(), mode=0o600)


@contextlib.contextmanager
def busy(run_folder: Path, state: RunState) -> Iterator[int]:
    """While a Stop works at the point ``state`` is at: the busy file is written
    (``mark_busy``) and removed when the Stop answers or fails (a Stop cut short
    leaves it). Yields how many Stops in a row were cut short there before."""
    cut = cut_short_before(run_folder, state.iteration, state.iteration_open)
    mark_busy(run_folder, state.iteration, state.iteration_open, cut)
    try:
        yield cut
    finally:
        busy_done(run_folder)


def busy_done(run_folder: Path) -> None:
    """This Stop answered: its busy file goes."""
    with contextlib.suppress(OSError):
        (run_folder / BUSY_FILE).unlink()


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def ask_person(record: RunRecord, run_id: str, where: str, checks: str) -> str:
    """Put the run at a gate (``awaiting_user``) whose question says the Stops were cut
    short at ``where`` and names the ``checks`` that run there; returns the note the
    session stops with. An answer lets the next Stop try once more."""
    question = (
        f"{GIVE_UP_AFTER} Stops in a row were cut short (killed, or past the Stop hook's "
        f"timeout) while {where}, so the checks there take longer than a Stop may run: "
        f"{checks or 'no check is named'}. Raise the hook's timeout in the CLI's settings "
        "or make those checks faster, then answer to try again"
    )

    def gate(s: RunState) -> None:
        s.gate, s.status = question, RunStatus.AWAITING_USER

    record.update(gate)
    record.emit(EventType.GATE, state="waiting", question=question)
    return (
        f"autopilot: run {run_id} waits for your answer: {question} "
        "(autopilot answer TEXT, then prompt the session again)"
    )
