"""``autopilot stop`` of a hook run, from any terminal.

A hook run has no driver to ask: its session's Stop hook is the only thing that
acts on it, and the session may be gone. So ``stop`` ends the run at once, holding
the registry's lock (no Stop of the session is answered meanwhile): the open
iteration, if any, ends through the same ``conclude`` step (one ``iteration_end``,
``endedBy`` ``stopped``), then the run (``abort``, ``user_stopped``), and its registry
entry goes, so the session's next Stop is let through. While a Stop is being
answered (a work item's checks can take minutes) the stop is only requested; that
Stop, or the next, ends the run the same way.
"""

from __future__ import annotations

from pathlib import Path

from autopilot.errors import UsageError
from autopilot.hook.decide import Arming
from autopilot.hook.inputs import HookAgent
from autopilot.hook.iteration import HookStop
from autopilot.hook.registry import load_armings, locked, remove_arming
from autopilot.loop.clock import Clock
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
