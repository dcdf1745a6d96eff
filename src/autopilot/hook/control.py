"""``autopilot stop`` of a hook run, from any terminal.

A hook run has no driver to ask: its session's Stop hook is the only thing that
acts on it, and the session may be gone. So ``stop`` ends the run at once, holding
the registry's lock (no Stop of the session is answered meanwhile): the open
iteration, if any, ends through the same ``conclude`` step (one ``iteration_end``,
``endedBy`` ``stopped``), then the run (``abort``, ``user_stopped``), and its registry
entry goes, so the session's next Stop is let through. While a Stop is being
answered (a work item's checks can take minutes) the stop is only requested; that
Stop, or the next, ends the run the same way.

A run armed for no session that no session claimed within its claim window
(``hook.arm.CLAIM_WINDOW_SECONDS`` unless ``arm --claim-window`` said otherwise) ends
with ``abort`` ``unclaimed`` and leaves the registry (``expire_unclaimed``): at the
next ``arm``, Stop of any session, ``status`` or ``list``, whichever comes first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from autopilot.core.vocabulary import HookAgent
from autopilot.errors import UsageError
from autopilot.hook.decide import claim_expired
from autopilot.hook.iteration import HookStop
from autopilot.hook.run_read import read_run
from autopilot.loop.clock import Clock
from autopilot.store.hook_registry import Arming, load_armings, locked, remove_arming
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state

LOCK_WAIT_SECONDS = 5.0
"""How long ``stop`` waits for a Stop being answered before it only requests."""


def stop_hook_run(run_dir: Path, clock: Clock, note: str) -> RunState | None:
    """End the hook run in ``run_dir`` now (see the module docstring).

    Returns:
        The run's state after it, or None when a Stop holds the registry for longer
        than ``LOCK_WAIT_SECONDS`` (the caller then requests the stop).

    Raises:
        UsageError: the run has ended.
        StateFileError: the run's state cannot be read or written.
    """
    root, run_id = run_dir.parent, run_dir.name
    with locked(root, LOCK_WAIT_SECONDS) as held:
        if not held:
            return None
        state = read_state(RunDir(run_dir).state)
        if state.terminated:
            raise UsageError(f"run {run_id} has already ended ({state.termination_reason})")
        armings, _ = load_armings(root)
        arming = next((a for a in armings if a.run_id == run_id), None)
        if arming is None:
            arming = _unregistered(run_dir)
        stop = HookStop(root, arming, clock)
        try:
            state = stop.close_stopped(note)
        finally:
            stop.close()
        remove_arming(root, run_id)
    return state


def _unregistered(run_dir: Path) -> Arming:
    """An arming for a run whose registry entry is gone or unreadable: what the
    iteration used is then unknown (no tokens, no session), but it still ends."""
    state = read_state(RunDir(run_dir).state)
    agent = HookAgent(state.agent) if state.agent in tuple(HookAgent) else HookAgent.CLAUDE
    return Arming(run_dir.name, agent, state.cwd or str(run_dir))


@dataclass(frozen=True)
class Expired:
    """A run no session claimed in time, ended by ``expire_unclaimed``: its id and
    why it ended, in words (the ``abort`` event's note)."""

    run_id: str
    note: str


def unclaimed_note(arming: Arming) -> str:
    """Why an unclaimed arming ended, in words."""
    until = time.strftime("%H:%M:%S", time.localtime(arming.claim_until_ms / 1000))
    return f"no {arming.agent.value} session stopped in {arming.project} before {until} to claim it"


def expire_unclaimed(root: Path, clock: Clock, wait_seconds: float | None = None) -> list[Expired]:
    """End every run whose claim window passed with no session claiming it (``abort``,
    ``unclaimed``) and drop its registry entry; cheap when none has.

    Args:
        root: The runs root.
        clock: Wall time.
        wait_seconds: How long to wait for the registry's lock (a Stop being answered
            holds it); None: as long as it takes. When it passes, nothing is done.

    Returns:
        The runs ended.

    Raises:
        StateFileError: a run's state cannot be written.
    """
    armings, _ = load_armings(root)
    if not any(claim_expired(a, clock.now_ms()) for a in armings):
        return []
    with locked(root, wait_seconds) as held:
        return expire_held(root, clock) if held else []


def expire_held(root: Path, clock: Clock) -> list[Expired]:
    """``expire_unclaimed`` for a caller that holds the registry's lock."""
    expired: list[Expired] = []
    armings, _ = load_armings(root)
    for arming in armings:
        if not claim_expired(arming, clock.now_ms()):
            continue
        run = read_run(root, arming.run_id)
        if run.state is None and not run.gone:
            continue  # unreadable: left as it is (status and doctor say why)
        if run.state is not None and not run.state.terminated:
            note = unclaimed_note(arming)
            stop = HookStop(root, arming, clock)
            try:
                stop.close_unclaimed(note)
            finally:
                stop.close()
            expired.append(Expired(arming.run_id, note))
        remove_arming(root, arming.run_id)
    return expired
