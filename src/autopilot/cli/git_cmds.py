"""``autopilot checkpoints | diff | restore | merge [RUN]``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from autopilot.cli.echo import say, say_json
from autopilot.config import parse_int
from autopilot.errors import RepositoryError, RunLockedError, UsageError
from autopilot.runtime.liveness import driver_alive
from autopilot.store.flock import FileLock
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore, read_state
from autopilot.view.safe import shown
from autopilot.workspace.checkpoints import Checkpoint, FileChange
from autopilot.workspace.merge import MergeMode, MergeResult, merge_back
from autopilot.workspace.repo import Repository, open_repository
from autopilot.workspace.run_workspace import RunPlace, RunWorkspace, open_run_workspace

_RUN_ARG = click.argument("run_ref", metavar="[RUN]", required=False)
_CTX = {"help_option_names": ["-h", "--help"]}


def _open(run_ref: str | None) -> tuple[Path, RunState, RunWorkspace]:
    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    folder = run_dir(root, run_id)
    state = read_state(RunDir(folder).state)
    return folder, state, open_run_workspace(folder, RunPlace.from_state_json(state.to_json()))


def _hold(folder: Path, state: RunState) -> FileLock:
    """The run's ``driver.lock``, so no driver starts while files change under it."""
    busy = RunLockedError(f"run {folder.name} is running; stop it first (autopilot stop)")
    if driver_alive(state) and not state.terminated:
        raise busy
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


@click.command(context_settings=_CTX)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per checkpoint.")
@_RUN_ARG
def checkpoints(as_json: bool, run_ref: str | None) -> int:
    """List RUN's checkpoints: the baseline, one after each iteration, and restores."""
    _, _, workspace = _open(run_ref)
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


@click.command(context_settings=_CTX)
@click.option("--iteration", "iteration", metavar="N", help="What iteration N changed.")
@click.option("--stat", is_flag=True, help="A summary per file instead of the patch.")
@_RUN_ARG
def diff(iteration: str | None, stat: bool, run_ref: str | None) -> int:
    """Show what RUN changed in the working tree (or what one iteration changed)."""
    _, _, workspace = _open(run_ref)
    history = workspace.checkpoints.history()
    if not history:
        raise _none_yet(workspace.run_id)
    if iteration is not None:
        number = parse_int(iteration, name="--iteration", minimum=1)
        new = workspace.checkpoints.find_iteration(number)
        old = workspace.checkpoints.before(new)
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


@click.command(context_settings=_CTX)
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
@_RUN_ARG
def restore(iteration: str | None, name: str | None, run_ref: str | None) -> int:
    """Bring the working tree back to a checkpoint of RUN (undoable).

    A checkpoint of the tree as it is comes first. Your branch, HEAD and index are
    not changed, and .autopilot/memory.md is not rewound.
    """
    if (iteration is None) == (name is None):
        raise UsageError("give one of --iteration N or --checkpoint NAME")
    folder, state, workspace = _open(run_ref)
    if not workspace.checkpoints.history():
        raise _none_yet(workspace.run_id)
    if iteration is not None:
        target = workspace.checkpoints.find_iteration(parse_int(iteration, name="--iteration"))
    else:
        target = workspace.checkpoints.find(str(name))
    lock = _hold(folder, state)
    try:
        result = workspace.checkpoints.restore(target)
    finally:
        lock.release()
    where = workspace.repo.top
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


@click.command(context_settings=_CTX)
@click.option("--squash", "mode", flag_value=MergeMode.SQUASH.value, help="One commit.")
@click.option(
    "--rebase",
    "mode",
    flag_value=MergeMode.REBASE.value,
    help="Replay the run's commits on top of your branch.",
)
@_RUN_ARG
def merge(mode: str | None, run_ref: str | None) -> int:
    """Merge a --worktree RUN's branch into your current branch, if it applies cleanly.

    On a conflict nothing is changed: the conflicting files are named and the
    run's branch is kept for you.
    """
    folder, state, workspace = _open(run_ref)
    worktree = workspace.worktree
    if worktree is None:
        raise UsageError(
            f"run {workspace.run_id} did not run in a worktree; its changes are already in "
            f"{workspace.repo.top}"
        )
    checkout = _checkout_for(workspace, worktree.origin)
    lock = _hold(folder, state)
    try:
        result = merge_back(
            checkout,
            worktree.branch,
            MergeMode(mode or MergeMode.MERGE.value),
            message=f"autopilot: merge run {workspace.run_id}\n\nBranch: {worktree.branch}\n",
        )
        if result.merged:
            _record_merge(folder, result)
    finally:
        lock.release()
    if not result.merged:
        say(f"nothing to merge: {result.into} already has everything on {result.branch}")
        return 0
    say(
        f"merged {result.branch} into {result.into} ({result.mode.value}): "
        f"{len(result.files)} file{'s' if len(result.files) != 1 else ''} changed, "
        f"now at {result.after[:12]} (was {result.before[:12]})"
    )
    dirty = workspace.repo.dirty_paths()
    if dirty:
        say(
            f"note: {len(dirty)} uncommitted file(s) in {workspace.repo.top} were not "
            "merged (only commits on the branch are)"
        )
    return 0


def _record_merge(folder: Path, result: MergeResult) -> None:
    """``merge`` in state.json: what ``prune --branches`` reads to know the branch is in."""
    record = {
        "branch": result.branch,
        "tip": result.tip,
        "into": result.into,
        "after": result.after,
        "mode": result.mode.value,
    }
    StateStore(RunDir(folder).state).update(lambda state: state.extra.update(merge=record))


def _checkout_for(workspace: RunWorkspace, origin: Path) -> Repository:
    """The user's checkout: the current directory's, if it is one of the run's
    repository other than the run's own worktree; else the one the run came from."""
    try:
        here = open_repository(Path.cwd())
    except RepositoryError:
        here = None
    if here is not None and here.same_repository(workspace.repo) and here.top != workspace.repo.top:
        return here
    return open_repository(origin)
