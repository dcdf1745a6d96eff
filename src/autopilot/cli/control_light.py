"""The bodies of ``autopilot pause | resume | stop [RUN]``, without click: the command
line (``cli.control_cmds``) and the fast path (``cli.fast``) both call them.

The common cases (a run that has not ended, is not a parallel run's or a hook's, and,
for ``stop``, whose driver holds it) are a locked change of one or two fields of
``state.json`` as plain JSON (``store.state_file``), without loading the typed state,
the config, the event log or liveness. Every other case goes through
``autopilot.control`` (``pause_in``, ``resume_in``, ``stop_in``), which reads the
state again, so what is said and written is the same
(``tests/cli/test_control_light.py``).
"""

from __future__ import annotations

from pathlib import Path

from autopilot.cli.echo import say
from autopilot.core.run_words import HOOK_MODE, RunStatus
from autopilot.errors import StateFileError
from autopilot.loop.clock import SystemClock
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.project_files import run_off_switch
from autopilot.store.run_files import DRIVER_LOCK_FILE, STATE_FILE
from autopilot.store.state_file import StateView, read_state_view, update_state_json

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from autopilot.store.run_state import RunState


class _Typed(Exception):
    """The state needs ``autopilot.control`` (nothing was written)."""


def run_folder(run_ref: str | None) -> Path:
    """The folder of the run ``run_ref`` names (``resolve_run``; None: this project's).

    Raises:
        RunNotFoundError: see ``resolve_run``.
        RunsRootError: see ``runs_root``.
    """
    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    return run_dir(root, run_id)


def _plain(view: StateView) -> None:
    """Refuse (``_Typed``) a state only ``autopilot.control`` handles: an ended run
    (its refusal), a parallel run (its lanes), a hook run (its session), a ``status``
    that is not one of autopilot's words (the typed reader derives and writes it)."""
    if view.terminated or "parallel" in view.data or view.mode == HOOK_MODE:
        raise _Typed
    if view.data.get("status") not in _STATUS_WORDS:
        raise _Typed


_STATUS_WORDS = frozenset(status.value for status in RunStatus)


def pause(run_ref: str | None) -> int:
    """``autopilot pause [RUN]``; its exit code (``control.pause``)."""
    folder = run_folder(run_ref)
    try:
        update_state_json(folder / STATE_FILE, _pause)
    except (_Typed, StateFileError):
        return pause_in(folder)
    say(f"{folder.name}: pause requested; it takes effect at the next boundary")
    return 0


def _pause(view: StateView) -> None:
    _plain(view)
    # ``pausedAt`` is set by the driver when it actually pauses at the boundary.
    view.set("paused", True)


def resume(run_ref: str | None) -> int:
    """``autopilot resume [RUN]``; its exit code (``control.resume``)."""
    folder = run_folder(run_ref)
    now = SystemClock().now_ms()
    before: list[StateView] = []

    def change(view: StateView) -> None:
        _plain(view)
        before.append(StateView(dict(view.data)))
        if view.paused:
            paused_at = view.paused_at_ms
            if paused_at is not None:
                view.set("totalPausedMs", view.total_paused_ms + max(0, now - paused_at))
            view.set("paused", False)
            view.set("pausedAt", None)

    try:
        after = update_state_json(folder / STATE_FILE, change)
    except (_Typed, StateFileError):
        return resume_in(folder)
    say(resume_message(folder.name, before[0], after))
    return 0


def resume_message(run_id: str, before: RunState | StateView, after: RunState | StateView) -> str:
    """What ``resume`` did: resumed, nothing to resume, or held by the OFF file."""
    off = run_off_switch(after) if after.cwd else None
    was_paused = before.status is RunStatus.PAUSED or before.paused
    if off is not None and was_paused:
        return f"{run_id}: still paused by {off}; autopilot on (or remove that file) to resume"
    if after.hold is not None and after.status is RunStatus.PAUSED and not after.terminated:
        return f"{run_id}: still paused until the file is fixed: {after.hold}"
    if not was_paused:
        return f"{run_id}: not paused; nothing to resume"
    return f"{run_id}: resumed"


def stop(now: bool, run_ref: str | None) -> int:
    """``autopilot stop [--now] [RUN]``; its exit code (``control.stop``: a run whose
    driver holds its ``driver.lock`` is asked to stop; any other goes there)."""
    folder = run_folder(run_ref)

    def change(view: StateView) -> None:
        _plain(view)
        view.set("stopRequested", True)
        view.set("stopReason", "autopilot stop")
        if now:
            view.set("stopNow", True)

    try:
        _plain(read_state_view(folder / STATE_FILE))
        if not _driver_holds(folder):
            raise _Typed
        update_state_json(folder / STATE_FILE, change)
    except (_Typed, StateFileError):
        return stop_in(folder, now)
    when = "now" if now else "at the next boundary"
    say(f"{folder.name}: stop requested; the run stops {when}")
    return 0


def _driver_holds(folder: Path) -> bool:
    """Some process holds the run's ``driver.lock`` (``stop_without_driver`` asks the
    same before it would end the run)."""
    from autopilot.store.flock import FileLock

    lock = FileLock(folder / DRIVER_LOCK_FILE)
    try:
        if not lock.acquire():
            return True
    except OSError:
        return False
    lock.release()
    return False


def pause_in(folder: Path) -> int:
    """``autopilot pause`` of the run in ``folder`` through ``autopilot.control``."""
    from autopilot import control

    say(control.pause(folder, SystemClock()).message)
    return 0


def resume_in(folder: Path) -> int:
    """``autopilot resume`` of the run in ``folder`` through ``autopilot.control``."""
    from autopilot import control
    from autopilot.store.run_state import RunState
    from autopilot.store.state import read_state_quietly

    before = read_state_quietly(folder / STATE_FILE) or RunState()
    result = control.resume(folder, SystemClock())
    say(resume_message(folder.name, before, result.state))
    return 0


def stop_in(folder: Path, now: bool) -> int:
    """``autopilot stop [--now]`` of the run in ``folder`` through ``autopilot.control``."""
    from autopilot import control

    say(control.stop(folder, SystemClock(), now=now).message)
    return 0
