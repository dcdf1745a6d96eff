"""``autopilot merge [RUN]``: a --worktree run's branch into the user's branch.

One merge at a time goes into a checkout (``runtime.locks.MergeLock``); the run is
held as ``restore`` holds it. A ``--verify`` command runs in a tree of the result
(``workspace.merge.verification_tree``, a temporary one under
``<runs-root>/.scratch``); SIGINT, SIGTERM and SIGHUP end it, its whole process
group, and leave nothing changed. What a killed merge left there is removed first.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

from autopilot.cli.echo import say
from autopilot.cli.git_cmds import CTX, RUN_ARG, hold_run, open_run
from autopilot.config_sources import build_config
from autopilot.core.workitems import Criterion
from autopilot.errors import (
    AutopilotError,
    MergeStoppedError,
    MergeVerifyError,
    RepositoryError,
    UsageError,
)
from autopilot.loop.checks import DEFAULT_CHECK_TIMEOUT_SECONDS, run_checks
from autopilot.loop.signals import Interrupts
from autopilot.runtime.locks import MergeLock
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore
from autopilot.view.safe import shown
from autopilot.workspace.merge import MergeMode, MergeResult, merge_back, verification_tree
from autopilot.workspace.repo import Repository, open_repository
from autopilot.workspace.run_workspace import RunWorkspace
from autopilot.workspace.scratch import scratch_root, sweep
from autopilot.workspace.worktrees import RunWorktree, restore_run_branch

MAX_VERIFY_EXCERPT_CHARS = 200
"""How much of a failing ``merge --verify`` command's output its error line quotes."""

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""What stops a ``merge --verify`` command (its process group ended, nothing changed)."""


@dataclass(frozen=True)
class _Verify:
    """The ``--verify`` commands (none: no verification) and the limit of each, in
    seconds (``--check-timeout``, else the config's ``check-timeout``, else 10 minutes)."""

    commands: tuple[str, ...]
    timeout_seconds: float


@click.command(context_settings=CTX)
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
@click.option(
    "--check-timeout",
    "check_timeout",
    metavar="DURATION",
    help="Limit per --verify command, e.g. 20m (default: config check-timeout, else 10m).",
)
@RUN_ARG
def merge(
    mode: str | None, verify: tuple[str, ...], check_timeout: str | None, run_ref: str | None
) -> int:
    """Merge a --worktree RUN's branch into your current branch, if it applies cleanly.

    On a conflict nothing is changed: the conflicting files are named and the
    run's branch is kept for you. With --verify, each CMD runs first in a tree
    holding exactly the merge's result (the run's worktree when it already is that);
    the merge happens only if every CMD exits 0 within --check-timeout.
    """
    if any(not command.strip() for command in verify):
        raise UsageError("--verify needs a command")
    if check_timeout is not None and not verify:
        raise UsageError("--check-timeout bounds --verify commands; give --verify CMD too")
    folder, state, workspace = open_run(run_ref)
    worktree = workspace.worktree
    if worktree is None:
        raise UsageError(
            f"run {workspace.run_id} did not run in a worktree; its changes are already in "
            f"{workspace.repo.top}"
        )
    checkout = _checkout_for(workspace, worktree.origin)
    # Resolved as a run resolves it (flag > environment > config files > default),
    # and only when there is something to bound: a config problem never stops a merge.
    timeout_seconds = (
        build_config({"check-timeout": check_timeout}, project=checkout.top).check_timeout_seconds
        if verify
        else DEFAULT_CHECK_TIMEOUT_SECONDS
    )
    into_checkout = MergeLock(folder.parent, checkout.top)
    into_checkout.acquire(workspace.run_id)
    interrupts = Interrupts()
    before = {number: signal.signal(number, interrupts.handle) for number in _STOP_SIGNALS}
    try:
        for line in sweep(scratch_root(folder.parent)):
            say(line)
        result, verified = _merge_held(
            folder,
            state,
            checkout,
            worktree,
            mode,
            _Verify(verify, timeout_seconds),
            lambda: interrupts.stop,
        )
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
        into_checkout.release()
    left_out = ", ".join(result.left_out)
    if not result.merged:
        if left_out:
            say(
                f"nothing to merge: {result.branch} changes only autopilot's records of the "
                f"run ({left_out}), which a merge leaves out"
            )
        else:
            say(f"nothing to merge: {result.into} already has everything on {result.branch}")
        return 0
    for line in verified:
        say(line)
    say(
        f"merged {result.branch} into {result.into} ({result.mode.value}): "
        f"{len(result.files)} file{'s' if len(result.files) != 1 else ''} changed, "
        f"now at {result.after[:12]} (was {result.before[:12]})"
    )
    if left_out:
        one = len(result.left_out) == 1
        say(
            f"{left_out} left out: autopilot's record{'' if one else 's'} of the run, not its "
            f"work ({result.into} keeps its own; {'it stays' if one else 'they stay'} on "
            f"{result.branch})"
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
    verify: _Verify,
    stop: Callable[[], bool],
) -> tuple[MergeResult, list[str]]:
    """``merge_back`` of the run's branch with the run held (``hold_run``), the merge
    recorded in state.json; returns what it did and the lines of the commands it was
    verified with. ``stop`` (a signal came) ends a ``--verify`` command at once."""
    lock = hold_run(folder, state)
    running = folder / VERIFY_RUNNING
    try:
        _end_verify_leftovers(folder)
        kept = _keep_branch(worktree)
        if kept is not None:
            say(f"autopilot: {kept}")
        if verify:
            running.touch(mode=0o600)
        verified: list[str] = []
        result = merge_back(
            checkout,
            worktree.branch,
            MergeMode(mode or MergeMode.MERGE.value),
            message=f"autopilot: merge run {folder.name}\n\nBranch: {worktree.branch}\n",
            verify=_verifier(
                verify, folder, checkout, worktree.path, worktree.branch, verified, stop
            )
            if verify.commands
            else None,
            scratch=scratch_root(folder.parent),
        )
        if result.merged:
            _record_merge(folder, result)
    finally:
        running.unlink(missing_ok=True)
        lock.release()
    return result, verified


VERIFY_RUNNING = "merge-verify.running"
"""In the run folder while ``merge --verify`` commands may run: a merge killed outright
leaves it, and the next merge of the run ends what its commands left running."""


def _end_verify_leftovers(folder: Path) -> None:
    """End what the ``--verify`` commands of a merge killed outright left running:
    every process carrying the run's id (``RUN_ID_ENV``, which they inherit) and the
    process groups they are in (``loop.leftovers.end_leftovers``). Called with the
    run held, so no driver of the run is alive whose processes carry it too."""
    marker = folder / VERIFY_RUNNING
    if not marker.exists():
        return
    from autopilot.loop.leftovers import end_leftovers

    ended = end_leftovers(folder.name, agent_pid=None, agent_started=None)
    if ended:
        say(f"autopilot: ended {ended} process(es) a killed merge's --verify left running")
    marker.unlink(missing_ok=True)


def _keep_branch(worktree: RunWorktree) -> str | None:
    """The run's branch made again at its worktree's HEAD if the agent deleted it
    (``worktrees.restore_run_branch``); what was done, or None."""
    try:
        return restore_run_branch(open_repository(worktree.path), worktree.branch)
    except AutopilotError:  # the worktree is gone (or git is): the branch is what there is
        return None


def _verifier(
    checks: _Verify,
    folder: Path,
    checkout: Repository,
    run_worktree: Path,
    branch: str,
    verified: list[str],
    stop: Callable[[], bool],
) -> Callable[[str], None]:
    """``merge_back``'s ``verify``: run ``checks.commands`` on the merge's result (the
    user's shell, ``checks.timeout_seconds`` each, each output saved in the run folder as
    ``check-merge-verify<N>.log``), appending one line per command to ``verified``.

    Each runs in a tree of the result under the runs root's scratch folder
    (``workspace.scratch``); ``stop`` ends it at once, its whole process group.

    Raises (from the callable):
        MergeVerifyError: a command did not exit 0; one line with its exit status
            and the end of what it printed.
        MergeStoppedError: ``stop`` said so (a signal came).
    """

    from autopilot.loop.descendants import RUN_ID_ENV

    # The commands carry the run's id: what they leave behind when this merge is
    # killed outright is found by it (``_end_verify_leftovers``).
    env = {**os.environ, RUN_ID_ENV: folder.name}

    def verify(target: str) -> None:
        criteria = [
            Criterion(id=f"merge-verify{number}", text=command, check=command)
            for number, command in enumerate(checks.commands, 1)
        ]
        scratch = scratch_root(folder.parent)
        with verification_tree(checkout, run_worktree, target, scratch=scratch) as place:
            for criterion in criteria:
                run = run_checks(
                    [criterion],
                    cwd=place,
                    folder=folder,
                    timeout_seconds=checks.timeout_seconds,
                    stop=stop,
                    env=env,
                )
                result = run.results[0]
                if result.stopped or stop():
                    raise MergeStoppedError(
                        f"merge --verify stopped: $ {criterion.check} was ended; nothing was "
                        f"changed and {branch} is kept"
                    )
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
