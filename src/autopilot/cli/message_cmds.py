"""``autopilot send [RUN] TEXT | --file F``, ``off``, ``on`` and ``memory [RUN]``."""

from __future__ import annotations

import time
from pathlib import Path

import click

from autopilot.cli import send_body
from autopilot.cli.echo import say
from autopilot.errors import UsageError
from autopilot.store.memory import read_memory
from autopilot.store.paths import list_run_ids, resolve_run, run_dir, runs_root
from autopilot.store.project_files import memory_path, off_path
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state, read_state_quietly

_CTX = {"help_option_names": ["-h", "--help"]}


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
    return send_body.send(file_name, no_start, args)


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
    """Switch autopilot back ON in this directory (removes .autopilot/OFF).

    Runs held here go on at their next check; a run whose daemon ended while OFF (its
    supervisor does not restart it then) is relaunched, as bare `autopilot` would.
    """
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
    from autopilot.cli.start_cmds import relaunch_runs

    relaunch_runs(Path.cwd().resolve(), say_why_not=False)
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
