"""``autopilot checkpoints | diff | restore | merge [RUN]``."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import click

from autopilot.cli.echo import say, say_json
from autopilot.config_values import parse_int
from autopilot.core.vocabulary import EventType
from autopilot.core.workitems import Criterion
from autopilot.errors import MergeVerifyError, RepositoryError, RunLockedError, UsageError
from autopilot.loop.checks import run_checks
from autopilot.loop.clock import SystemClock
from autopilot.runtime.liveness import driver_alive, supervisor_alive
from autopilot.runtime.locks import MergeLock
from autopilot.store.events import EventLog
from autopilot.store.flock import FileLock
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore, read_state
from autopilot.view.safe import shown
from autopilot.workspace.checkpoint_facts import Checkpoint, FileChange, RestoreResult
from autopilot.workspace.merge import MergeMode, MergeResult, merge_back, verification_tree
from autopilot.workspace.repo import Repository, open_repository
from autopilot.workspace.run_workspace import RunPlace, RunWorkspace, open_run_workspace
from autopilot.workspace.taking import MAX_FILES_IN_EVENT
from autopilot.workspace.worktrees import RunWorktree

MAX_VERIFY_EXCERPT_CHARS = 200
"""How much of a failing ``merge --verify`` command's output its error line quotes."""

_RUN_ARG = click.argument("run_ref", metavar="[RUN]", required=False)
_CTX = {"help_option_names": ["-h", "--help"]}


def _open(run_ref: str | None) -> tuple[Path, RunState, RunWorkspace]:
    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    folder = run_dir(root, run_id)
    state = read_state(RunDir(folder).state)
    return folder, state, open_run_workspace(folder, RunPlace.from_state_json(state.to_json()))


def _hold(folder: Path, state: RunState) -> FileLock:
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
        _log_restore(folder, result)
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


@click.command(context_settings=_CTX)
@click.option("--squash", "mode", flag_value=MergeMode.SQUASH.value, help="One commit.")
@click.option(
    "--rebase",
    "mode",
    flag_value=MergeMode.REBASE.value,
    help="Replay the run's commits on top of your branch.",
)
@click.option(
    "--verify",
    "verify",
    metavar="CMD",
    multiple=True,
    help="A shell command run on the merge's result before your branch moves "
    "(repeatable); a failure changes nothing.",
)
@_RUN_ARG
def merge(mode: str | None, verify: tuple[str, ...], run_ref: str | None) -> int:
    """Merge a --worktree RUN's branch into your current branch, if it applies cleanly.

    On a conflict nothing is changed: the conflicting files are named and the
    run's branch is kept for you. With --verify, each CMD runs first in a tree
    holding exactly the merge's result (the run's worktree when it already is that);
    the merge happens only if every CMD exits 0.
    """
    if any(not command.strip() for command in verify):
        raise UsageError("--verify needs a command")
    folder, state, workspace = _open(run_ref)
    worktree = workspace.worktree
    if worktree is None:
        raise UsageError(
            f"run {workspace.run_id} did not run in a worktree; its changes are already in "
            f"{workspace.repo.top}"
        )
    checkout = _checkout_for(workspace, worktree.origin)
    into_checkout = MergeLock(folder.parent, checkout.top)
    into_checkout.acquire(workspace.run_id)
    try:
        result, verified = _merge_held(folder, state, checkout, worktree, mode, verify)
    finally:
        into_checkout.release()
    if not result.merged:
        say(f"nothing to merge: {result.into} already has everything on {result.branch}")
        return 0
    for line in verified:
        say(line)
    say(
        f"merged {result.branch} into {result.into} ({result.mode.value}): "
        f"{len(result.files)} file{'s' if len(result.files) != 1 else ''} changed, "
        f"now at {result.after[:12]} (was {result.before[:12]})"
    )
    dirty = workspace.repo.dirty_paths(work_only=True)
    if dirty:
        say(
            f"note: {len(dirty)} uncommitted file(s) in {workspace.repo.top} were not "
            "merged (only commits on the branch are)"
        )
    return 0


def _merge_held(
    folder: Path,
    state: RunState,
    checkout: Repository,
    worktree: RunWorktree,
    mode: str | None,
    verify: tuple[str, ...],
) -> tuple[MergeResult, list[str]]:
    """``merge_back`` of the run's branch with the run held (``_hold``), the merge
    recorded in state.json; returns what it did and the lines of the commands it was
    verified with."""
    lock = _hold(folder, state)
    try:
        verified: list[str] = []
        result = merge_back(
            checkout,
            worktree.branch,
            MergeMode(mode or MergeMode.MERGE.value),
            message=f"autopilot: merge run {folder.name}\n\nBranch: {worktree.branch}\n",
            verify=_verifier(verify, folder, checkout, worktree.path, worktree.branch, verified)
            if verify
            else None,
        )
        if result.merged:
            _record_merge(folder, result)
    finally:
        lock.release()
    return result, verified


def _verifier(
    commands: tuple[str, ...],
    folder: Path,
    checkout: Repository,
    run_worktree: Path,
    branch: str,
    verified: list[str],
) -> Callable[[str], None]:
    """``merge_back``'s ``verify``: run ``commands`` on the merge's result (the user's
    shell, a timeout, each output saved in the run folder as
    ``check-merge-verify<N>.log``), appending one line per command to ``verified``.

    Raises (from the callable):
        MergeVerifyError: a command did not exit 0; one line with its exit status
            and the end of what it printed.
    """

    def verify(target: str) -> None:
        criteria = [
            Criterion(id=f"merge-verify{number}", text=command, check=command)
            for number, command in enumerate(commands, 1)
        ]
        with verification_tree(checkout, run_worktree, target) as place:
            for criterion in criteria:
                run = run_checks([criterion], cwd=place, folder=folder)
                result = run.results[0]
                if not result.passed:
                    tail = " ".join(result.output_tail.split())
                    said = f": …{tail[-MAX_VERIFY_EXCERPT_CHARS:]}" if tail else ""
                    raise MergeVerifyError(
                        f"merge --verify failed: $ {criterion.check}: {result.status_text()}"
                        f"{shown(said)}; nothing was changed and {branch} is kept "
                        f"(output: {result.log_path})"
                    )
                verified.append(
                    f"verified: $ {criterion.check}: {result.status_text()} (in {place}, "
                    f"at {target[:12]})"
                )

    return verify


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
