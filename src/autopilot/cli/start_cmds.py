"""``autopilot start`` (drive a run again) and ``relaunch`` (the runs left active)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from autopilot import control
from autopilot.agents.environment import missing_agent_env
from autopilot.cli.detached import launch_detached
from autopilot.cli.echo import say
from autopilot.cli.run_cmds import drive
from autopilot.core.vocabulary import HOOK_MODE, PARALLEL_MODE
from autopilot.errors import RunLockedError, UsageError
from autopilot.loop.clock import SystemClock
from autopilot.runtime.agents import adapter_for_state
from autopilot.runtime.liveness import driver_alive, supervisor_alive
from autopilot.runtime.run_result import ending_line, result_of
from autopilot.store.paths import list_run_ids, resolve_run, run_dir, runs_root
from autopilot.store.project_files import run_off_switch
from autopilot.store.run_state import REBUILT_MARK, RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state, read_state_quietly

if TYPE_CHECKING:
    from autopilot.core.restart import RelaunchCandidate


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_ref", metavar="[RUN]", required=False)
@click.option(
    "--foreground",
    is_flag=True,
    help="Drive the run in this terminal (the live view) instead of in the background.",
)
@click.option(
    "--plain", is_flag=True, help="Drive it in this terminal, one line per event (--foreground)."
)
@click.option(
    "--env-missing-ok",
    is_flag=True,
    help="Start it even though this shell lacks some of the agent's variables the run "
    "started with (e.g. after switching from an API key to a login).",
)
def start(run_ref: str | None, foreground: bool, plain: bool, env_missing_ok: bool) -> int:
    """Start RUN again, in the background, if it has not ended (after a crash, a reboot,
    a pause). Returns at once.

    An ended run (completed, aborted, stopped) cannot be started again: begin a new
    run with autopilot run.

    A pause request left over is cleared. Budgets, spend, iteration count, session ids
    and queued messages are restored; an iteration that was running is started again.
    A daemon still running is never doubled: if only its supervisor died, a new
    supervisor adopts it. A run already running, or a work tree another run drives
    or another command is starting a run in, is refused (exit 4).

    The agent gets this shell's environment: if it lacks variables of the agent's
    the run started with (e.g. ANTHROPIC_API_KEY), the run is left as it is and
    start says which (exit 2), unless --env-missing-ok.
    """
    foreground = foreground or plain
    root = runs_root()
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    folder = run_dir(root, run_id)
    before = read_state(RunDir(folder).state)
    state = control.repair(folder, SystemClock())
    if state.terminated and not before.terminated:
        # It had ended: the crash came after its last decision was logged.
        result = result_of(state)
        say(ending_line(result) + " (as its event log records)")
        return result.exit_code
    if state.terminated:
        raise UsageError(
            f"run {run_id} has already ended ({state.termination_reason}); an ended run "
            "cannot be started again: begin a new one with autopilot run"
        )
    if state.cwd is None:
        raise UsageError(
            f"run {run_id} was written by another implementation and records no work tree; "
            "it cannot be relaunched"
        )
    if state.extra.get(REBUILT_MARK):
        raise UsageError(
            f"run {run_id}'s state.json was rebuilt from its event log, which does not record "
            f"its prompt and budgets: it cannot be started again; end it (autopilot stop "
            f"{run_id}) and begin a new run"
        )
    if state.mode == HOOK_MODE:
        raise UsageError(
            f"run {run_id} runs in its agent session's Stop hook (autopilot arm): prompt that "
            "session to go on, or autopilot stop it"
        )
    if state.mode == PARALLEL_MODE:
        return start_lanes(root, state, env_missing_ok=env_missing_ok)
    daemon_alive = driver_alive(state)
    if daemon_alive and foreground:
        raise RunLockedError(f"run {run_id} is still being driven (pid {state.pid})")
    if not daemon_alive and not env_missing_ok:
        _refuse_missing_env(state)
    if state.paused:
        control.resume(folder, SystemClock())
        say(f"autopilot: {run_id}: the pause request left over is cleared")
    if run_off_switch(state) is not None:
        say(
            "autopilot: autopilot is OFF in this project: the run holds at its next "
            "boundary until `autopilot on`",
            err=True,
        )
    if daemon_alive and state.pid is not None and not supervisor_alive(state):
        say(f"autopilot: adopting the running daemon of {run_id} (pid {state.pid})")
        return launch_detached(root, run_id, adopt=state.pid)
    adapter = adapter_for_state(state)
    adapter.check_installed()
    if state.iteration_open:  # recovery charges it before the run goes on
        where = (
            f"after iteration {state.iteration}, cut short by the driver's end; it counts "
            f"({state.spend.iterations} spent before it)"
        )
    else:
        where = f"at iteration {state.iteration} ({state.spend.iterations} spent)"
    say(f"autopilot: relaunching {run_id} {where}")
    if foreground:
        return drive(root, run_id, adapter, plain=plain)
    return launch_detached(root, run_id)


def _refuse_missing_env(state: RunState) -> None:
    """Refuse to drive ``state``'s run from this shell if it lacks variables of the
    agent's the run started with: its agent would not be logged in.

    Raises:
        UsageError: Naming the variables and how to go on.
    """
    missing = missing_agent_env(state.agent_env, os.environ)
    if missing:
        names = ", ".join(missing)
        raise UsageError(
            f"run {state.run_id}'s agent started with {names}, which this shell lacks: "
            f"its agent would not be logged in; export {missing[0]} (or start it from the "
            f"shell it ran in), or autopilot start --env-missing-ok {state.run_id} to go "
            "on without"
        )


def start_lanes(root: Path, state: RunState, *, env_missing_ok: bool = False) -> int:
    """Start again each lane of a parallel run that has not ended and is not driven;
    none if this shell lacks the agent's variables a lane started with (unless
    ``env_missing_ok``)."""
    from autopilot.store.lanes import lane_runs

    lanes = []
    for lane_id in lane_runs(state):
        lane = read_state_quietly(RunDir(run_dir(root, lane_id)).state)
        if lane is None or lane.terminated or driver_alive(lane) or supervisor_alive(lane):
            continue
        if not env_missing_ok:
            _refuse_missing_env(lane)
        lanes.append((lane_id, lane))
    started = 0
    for lane_id, lane in lanes:
        say(f"autopilot: relaunching {lane_id} at iteration {lane.iteration}")
        try:
            launch_detached(root, lane_id)
        except RunLockedError as busy:  # started meanwhile, by another command
            say(f"autopilot: not relaunching {lane_id}: {busy}")
            continue
        started += 1
    if not started:
        say(f"autopilot: every agent of {state.run_id} is running or has ended")
    return 0


def relaunchable_runs(root: Path, project: Path | None) -> list[tuple[str, str | None]]:
    """Every run of ``project`` (None: every project) not ended, with why it must not
    be relaunched automatically (None: it should be; ``core.restart.relaunch_verdict``).
    At most one run per work tree is relaunched (``core.restart.one_per_work_tree``)."""
    from autopilot.core.restart import RelaunchCandidate, one_per_work_tree, relaunch_verdict

    found = []
    for run_id in list_run_ids(root):
        state = read_state_quietly(RunDir(root / run_id).state)
        if state is None:
            unreadable = _unreadable_run(RunDir(root / run_id), project)
            if unreadable is not None:
                found.append(unreadable)
            continue
        if state.terminated:
            continue
        if project is not None and state.cwd != str(project):
            continue
        daemon, supervisor = driver_alive(state), supervisor_alive(state)
        why = relaunch_verdict(
            status=state.status.value,
            terminated=False,
            daemon_alive=daemon,
            supervisor_alive=supervisor,
            off=run_off_switch(state) is not None,
            mode=state.mode,
            env_missing=missing_agent_env(state.agent_env, os.environ),
        )
        driven = bool(daemon or supervisor)
        found.append(RelaunchCandidate(run_id, state.cwd or "", state.started_at_ms, why, driven))
    return one_per_work_tree(found)


def _unreadable_run(folder: RunDir, project: Path | None) -> RelaunchCandidate | None:
    """A run of ``project`` (as its ``armed`` event tells) whose ``state.json`` cannot be
    read although its log has not ended: never relaunched, but named with the way out."""
    from autopilot.core.restart import RelaunchCandidate
    from autopilot.core.vocabulary import EventType
    from autopilot.store.events import read_events

    armed: dict[str, Any] | None = None
    for event in read_events(folder.events):
        if event["type"] in (EventType.COMPLETE, EventType.ABORT):
            return None
        if event["type"] == EventType.ARMED and armed is None:
            armed = event
    if armed is None:
        return None
    cwd, started = armed.get("cwd"), armed.get("startedAt")
    if not isinstance(cwd, str) or (project is not None and cwd != str(project)):
        return None
    why = (
        "its state.json cannot be read: `autopilot doctor --repair` rebuilds it from its "
        f"event log, then `autopilot start {folder.run_id}` goes on with it"
    )
    return RelaunchCandidate(folder.run_id, cwd, started if isinstance(started, int) else 0, why)


def relaunch_runs(project: Path | None, *, say_why_not: bool = True) -> int:
    """Relaunch, detached, the runs left active in ``project`` (None: all); returns how
    many were relaunched. Runs that are not relaunched are listed with the reason
    (``say_why_not``)."""
    root = runs_root(create=False)
    launched = 0
    for run_id, why in relaunchable_runs(root, project):
        if why is not None:
            if say_why_not:
                say(f"autopilot: not relaunching {run_id}: {why}")
            continue
        state = control.repair(run_dir(root, run_id), SystemClock())
        if state.terminated:
            # A crash between the log's terminal event and state.json: repaired, not rerun.
            say(f"autopilot: run {run_id} had ended, as its event log records")
            continue
        say(f"autopilot: relaunching {run_id} at iteration {state.iteration}")
        try:
            launch_detached(root, run_id)
        except RunLockedError as refused:  # started meanwhile, by another command
            say(f"autopilot: not relaunching {run_id}: {refused}")
            continue
        launched += 1
    return launched


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--all", "all_projects", is_flag=True, help="Every project's runs, not this one's.")
def relaunch(all_projects: bool) -> int:
    """Relaunch runs left active (what bare `autopilot` does; the login service runs
    `autopilot relaunch --all`).

    A run whose status was running, planning, waiting or rate_limited goes on in the
    background; a paused, gated or ended run, or one whose daemon or supervisor is
    alive, is left alone, as is everything while autopilot is OFF in its project.
    """
    launched = relaunch_runs(None if all_projects else Path.cwd().resolve())
    if not launched:
        say("autopilot: no run to relaunch")
    return 0


def relaunch_active_run() -> int:
    """Bare ``autopilot``: relaunch this project's run that was left active, if any;
    otherwise show the help (or, where a run was left alone and said why, where to
    look next)."""
    project = Path.cwd().resolve()
    if relaunch_runs(project):
        return 0
    if relaunchable_runs(runs_root(create=False), project):
        say(
            "autopilot: `autopilot status` shows this project's run; "
            "`autopilot --help` the commands"
        )
        return 0
    click.echo(click.get_current_context().get_help())
    return 0
