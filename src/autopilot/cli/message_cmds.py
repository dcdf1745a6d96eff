"""``autopilot send [RUN] TEXT | --file F``, ``off``, ``on`` and ``memory [RUN]``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from autopilot.cli.echo import say
from autopilot.core.restart import HOOK_MODE
from autopilot.core.vocabulary import RunStatus
from autopilot.errors import UsageError
from autopilot.loop.clock import SystemClock
from autopilot.runtime.liveness import driver_alive, supervisor_alive
from autopilot.runtime.messages import queue_message
from autopilot.store.memory import read_memory
from autopilot.store.paths import list_run_ids, resolve_run, run_dir, runs_root
from autopilot.store.project_files import memory_path, off_path, run_off_switch
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state, read_state_quietly

_CTX = {"help_option_names": ["-h", "--help"]}


def _read_text_file(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).expanduser().read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise UsageError(f"cannot read {name}: {error.strerror or error}") from None


@click.command(context_settings=_CTX)
@click.option("--file", "file_name", metavar="F", help="Send the text of file F (- for stdin).")
@click.option(
    "--no-start", is_flag=True, help="Only queue it: do not relaunch a run whose daemon is dead."
)
@click.argument("args", nargs=-1, metavar="[RUN] TEXT")
def send(file_name: str | None, no_start: bool, args: tuple[str, ...]) -> int:
    """Message the agent of RUN at its next iteration; never lost.

    Works whatever the run is doing (running, paused, waiting, its daemon dead): the
    message is on disk when this returns, and the next iteration's prompt carries it.
    A run whose daemon is dead is relaunched in the background to read it, unless
    autopilot is OFF in its project or the run waits for your answer to a gate.
    RUN omitted: this directory's run.
    """
    if file_name is not None:
        if len(args) > 1:
            raise UsageError("with --file, give at most RUN")
        run_ref = args[0] if args else None
        text = _read_text_file(file_name)
    elif len(args) == 1:
        run_ref, text = None, args[0]
    elif len(args) == 2:
        run_ref, text = args
    else:
        raise UsageError("give the message as TEXT (or --file F), optionally after RUN")
    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    folder = run_dir(root, run_id)
    from autopilot.manage.activity import settled_state

    # A run whose log says it ended is not relaunched for a message (state.json may
    # not have been writable to say so).
    settled = settled_state(folder, read_state(RunDir(folder).state))
    if settled.terminated:
        raise UsageError(
            f"run {run_id} has already ended ({settled.termination_reason or settled.status}); "
            "it takes no more messages"
        )
    message = queue_message(folder, text, SystemClock())
    say(
        f"autopilot: message {message.id} queued for {run_id}; "
        "the agent gets it at its next iteration"
    )
    state = read_state(RunDir(folder).state)
    if driver_alive(state) or supervisor_alive(state):
        return 0
    if state.mode == HOOK_MODE:
        say(
            f"autopilot: {run_id} runs in its agent session's Stop hook: the message goes "
            "with the next iteration that session starts"
        )
        return 0
    why = _why_not_relaunched(state, no_start)
    if why is not None:
        say(
            f"autopilot: no daemon is running {run_id} ({why}): the message is delivered "
            f"once the run goes on (autopilot start {run_id})"
        )
        return 0
    from autopilot.cli.run_cmds import launch_detached

    say(f"autopilot: no daemon was running {run_id}: relaunching it to read the message")
    return launch_detached(root, run_id)


def _why_not_relaunched(state: RunState, no_start: bool) -> str | None:
    """Why ``send`` leaves a run with a dead daemon as it is, or None to relaunch it."""
    from autopilot.errors import AgentNotFoundError
    from autopilot.runtime.agents import adapter_for_state

    if no_start:
        return "--no-start"
    if run_off_switch(state) is not None:
        return "autopilot is OFF in its project"
    if state.status in (RunStatus.GATED, RunStatus.AWAITING_USER):
        return f"it is {state.status.value}: it waits for your answer"
    try:
        adapter_for_state(state).check_installed()
    except AgentNotFoundError as error:
        return str(error)
    return None


@click.command(context_settings=_CTX)
def off() -> int:
    """Switch autopilot OFF in this directory (.autopilot/OFF).

    While OFF, no iteration starts, nothing is relaunched or retried; events, status,
    notifications and messages still flow (messages stay queued).
    """
    path = off_path(Path.cwd())
    if path.exists():
        say(f"autopilot: already OFF ({path})")
        return 0
    try:
        path.parent.mkdir(exist_ok=True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S %z")
        path.write_text(f"switched off with 'autopilot off' at {stamp}\n", encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None
    say(f"autopilot: OFF ({path}); runs here hold at their next boundary")
    return 0


@click.command(context_settings=_CTX)
def on() -> int:
    """Switch autopilot back ON in this directory (removes .autopilot/OFF)."""
    path = off_path(Path.cwd())
    if not path.exists():
        say("autopilot: already ON")
        return 0
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as error:
        raise UsageError(f"cannot remove {path}: {error.strerror or error}") from None
    say("autopilot: ON; held runs here go on at their next check")
    return 0


@click.command(context_settings=_CTX)
@click.argument("run_ref", metavar="[RUN]", required=False)
def memory(run_ref: str | None) -> int:
    """Print the memory file of RUN (.autopilot/memory.md of its directory).

    RUN omitted: this directory's run, or this directory's memory file if it has no run.
    """
    root = runs_root(create=False)
    cwd = Path.cwd().resolve()
    folder: Path | None = None
    project = cwd
    if run_ref is not None or any(
        (s := read_state_quietly(RunDir(root / r).state)) and s.cwd == str(cwd)
        for r in list_run_ids(root)
    ):
        run_id = resolve_run(root, run_ref, project=None if run_ref else cwd)
        folder = run_dir(root, run_id)
        project = Path(read_state(RunDir(folder).state).cwd or cwd)
    found = read_memory(project, folder)
    if found is None:
        say(f"autopilot: no memory file yet ({memory_path(project)})")
        return 0
    path, text = found
    say(f"# {path}", err=True)
    say(text.removesuffix("\n"))
    return 0
