"""``autopilot checkpoints | diff | restore [RUN]``; ``merge`` is in ``merge_cmd``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from autopilot.cli.echo import say, say_json
from autopilot.config_values import parse_int
from autopilot.core.vocabulary import EventType
from autopilot.errors import RunLockedError, UsageError
from autopilot.loop.clock import SystemClock
from autopilot.runtime.liveness import driver_alive, supervisor_alive
from autopilot.store.events import EventLog
from autopilot.store.flock import FileLock
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state
from autopilot.view.safe import shown
from autopilot.workspace.checkpoint_facts import Checkpoint, FileChange, RestoreResult
from autopilot.workspace.run_workspace import RunPlace, RunWorkspace, open_run_workspace
from autopilot.workspace.taking import MAX_FILES_IN_EVENT

RUN_ARG = click.argument("run_ref", metavar="[RUN]", required=False)
CTX = {"help_option_names": ["-h", "--help"]}


def open_run(run_ref: str | None) -> tuple[Path, RunState, RunWorkspace]:
    """RUN (or the latest run of the current directory): its folder, state and
    repository.

    Raises:
        RunNotFoundError: no such run; RepositoryError: its repository is gone.
    """
    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    folder = run_dir(root, run_id)
    state = read_state(RunDir(folder).state)
    return folder, state, open_run_workspace(folder, RunPlace.from_state_json(state.to_json()))


def hold_run(folder: Path, state: RunState) -> FileLock:
    """The run's ``driver.lock``, so no driver starts while files change under it.

    Refused while the run is active in any form (``runtime.liveness``): its driver
    alive, or a detached run's supervisor alive (between a daemon's death and its
    relaunch no driver runs, but one is about to).

    Raises:
        RunLockedError: the run is active.
    """
    busy = RunLockedError(f"run {folder.name} is running; stop it first (autopilot stop)")
    if driver_alive(state):
        raise busy
    if supervisor_alive(state):
        raise RunLockedError(
            f"run {folder.name} is being relaunched by its supervisor (pid "
            f"{state.supervisor_pid}); stop it first (autopilot stop)"
        )
    lock = FileLock(RunDir(folder).driver_lock)
    if not lock.acquire():
        raise busy
    return lock


def _none_yet(run_id: str) -> UsageError:
    return UsageError(
        f"run {run_id} has no checkpoints (it ran with checkpoints off or outside a git repository)"
    )


def _summary(changes: tuple[FileChange, ...], limit: int = 8) -> str:
    shown = ", ".join(change.describe() for change in changes[:limit])
    more = f", and {len(changes) - limit} more" if len(changes) > limit else ""
    return f"{len(changes)} file{'s' if len(changes) != 1 else ''} ({shown}{more})"


@click.command(context_settings=CTX)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per checkpoint.")
@RUN_ARG
def checkpoints(as_json: bool, run_ref: str | None) -> int:
    """List RUN's checkpoints: the baseline, one after each iteration, and restores."""
    _, _, workspace = open_run(run_ref)
    found = workspace.checkpoints.history()
    if as_json:
        for item in found:
            say_json(_checkpoint_json(item))
        return 0
    if not found:
        say(str(_none_yet(workspace.run_id)))
        return 0
    say(f"{'checkpoint':<20} {'iteration':>9} {'files':>6}  {'commit':<12}  taken")
    for item in found:
        iteration = "-" if item.iteration is None else str(item.iteration)
        taken = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(item.created_at_ms / 1000))
        say(f"{item.name:<20} {iteration:>9} {item.files_changed:>6}  {item.sha[:12]:<12}  {taken}")
    return 0


def _checkpoint_json(item: Checkpoint) -> dict[str, object]:
    return {
        "name": item.name,
        "kind": item.kind.value,
        "iteration": item.iteration,
        "sha": item.sha,
        "tree": item.tree,
        "head": item.head,
        "filesChanged": item.files_changed,
        "createdAtMs": item.created_at_ms,
    }


def _colored(line: str) -> str:
    """A line of a patch styled as git colours it."""
    if line.startswith(("+++", "---", "diff --git", "index ")):
        return click.style(line, bold=True)
    if line.startswith("+"):
        return click.style(line, fg="green")
    if line.startswith("-"):
        return click.style(line, fg="red")
    if line.startswith("@@"):
        return click.style(line, fg="cyan")
    return line


@click.command(context_settings=CTX)
@click.option("--iteration", "iteration", metavar="N", help="What iteration N changed.")
@click.option("--stat", is_flag=True, help="A summary per file instead of the patch.")
@RUN_ARG
def diff(iteration: str | None, stat: bool, run_ref: str | None) -> int:
    """Show what RUN changed in the working tree (or what one iteration changed).

    autopilot's records in .autopilot/ (memory.md, tasks.jsonl, …) are left out.
    """
    _, _, workspace = open_run(run_ref)
    history = workspace.checkpoints.history()
    if not history:
        raise _none_yet(workspace.run_id)
    if iteration is not None:
        number = parse_int(iteration, name="--iteration", minimum=1)
        new = workspace.checkpoints.find_iteration(number)
        # An iteration that changed nothing shares an earlier one's checkpoint.
        old = workspace.checkpoints.before(new) if new.iteration == number else new
    else:
        old, new = history[0], history[-1]
    patch = workspace.checkpoints.diff(old, new, stat=stat)
    if not sys.stdout.isatty():
        sys.stdout.flush()
        sys.stdout.buffer.write(patch)  # as git wrote it, e.g. for git apply
        sys.stdout.buffer.flush()
        return 0
    for line in shown(patch.decode("utf-8", "replace"), newlines=True).splitlines():
        click.echo(_colored(line))
    return 0


@click.command(context_settings=CTX)
@click.option(
    "--iteration",
    "iteration",
    metavar="N",
    help="The checkpoint after iteration N (0: the baseline).",
)
@click.option(
    "--checkpoint",
    "name",
    metavar="NAME",
    help="A checkpoint by name "
    "(see autopilot checkpoints), e.g. before-restore-0001 to undo a restore.",
)
@RUN_ARG
def restore(iteration: str | None, name: str | None, run_ref: str | None) -> int:
    """Bring the working tree back to a checkpoint of RUN (undoable).

    A checkpoint of the tree as it is comes first. Your branch, HEAD and index are
    not changed, and autopilot's records in .autopilot/ (memory.md, OFF, tasks.jsonl,
    approved-run.json, the consistency-decision files) are not rewound; config.toml is.
    """
    if (iteration is None) == (name is None):
        raise UsageError("give one of --iteration N or --checkpoint NAME")
    folder, state, workspace = open_run(run_ref)
    if not workspace.checkpoints.history():
        raise _none_yet(workspace.run_id)
    number = None if iteration is None else parse_int(iteration, name="--iteration")
    if number is not None:
        target = workspace.checkpoints.find_iteration(number)
    else:
        target = workspace.checkpoints.find(str(name))
    lock = hold_run(folder, state)
    try:
        result = workspace.checkpoints.restore(target)
        _log_restore(folder, result)
    finally:
        lock.release()
    where = workspace.repo.top
    if number is not None and target.iteration != number:
        say(f"iteration {number} changed nothing: it shares checkpoint {target.name}")
    if result.changes:
        say(
            f"restored {target.name} of run {workspace.run_id} in {where}: "
            f"{_summary(result.changes)}"
        )
    else:
        say(f"{where} already matches {target.name} of run {workspace.run_id}")
    for path in result.kept:
        say(f"kept {path} as it is (a restore does not rewind it)")
    say(
        "your branch, HEAD and index were not changed; to undo: "
        f"autopilot restore {workspace.run_id} --checkpoint {result.safety.name}"
    )
    return 0


def _log_restore(folder: Path, result: RestoreResult) -> None:
    """A ``restored`` event in the run's log (``docs/formats.md``), so ``replay`` and
    ``status`` show what the restore did and how to undo it."""
    log = EventLog(RunDir(folder).events, folder.name, SystemClock().now_ms)
    try:
        log.emit(
            EventType.RESTORED,
            checkpoint=result.target.name,
            sha=result.target.sha,
            iteration=result.target.iteration,
            safetyCheckpoint=result.safety.name,
            safetySha=result.safety.sha,
            filesChanged=len(result.changes),
            files=[f"{c.status} {c.path}" for c in result.changes[:MAX_FILES_IN_EVENT]],
            kept=list(result.kept) or None,
        )
        log.sync()
    finally:
        log.close()
