"""A lane's completed work item, landed in its parallel run's branch.

A parallel backlog run (``autopilot run --backlog --parallel N``) has a run branch
``autopilot/<runId>``, checked out in the run's own worktree (the integration
worktree, where only autopilot works), and one lane per agent, each a worktree run on
its own branch started from the run branch. When a lane's item is completed (its
checks passed), ``land`` commits what the lane's work tree holds, then, under the
run's merge lock so merges happen one at a time, merges the lane's branch into the
run branch with a real ``git merge --no-ff`` (autopilot's identity, no hooks). On a
conflict the merge is aborted (the run branch is unchanged), the lane's work is kept
under ``refs/autopilot/<laneRunId>/conflict-<item>-<attempt>``, and the conflicting
files are named. Either way the lane's work tree then moves to the run branch's
latest commit, so its next item starts from everything merged so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autopilot.errors import RepositoryError
from autopilot.store.flock import FileLock
from autopilot.workspace.repo import AUTOPILOT_IDENTITY, Repository, first_line, split_z

MERGE_LOCK_TIMEOUT_SECONDS = 600.0


@dataclass(frozen=True)
class Merged:
    """What ``land`` did.

    Attributes:
        sha: The run branch's commit after the merge (None on a conflict).
        conflicts: The conflicting paths (empty when it merged).
    """

    sha: str | None
    conflicts: tuple[str, ...]


OWN_FILES = (":(exclude).autopilot", ":(exclude,glob)**/.autopilot/**")
"""The lane's ``.autopilot/`` (its memory file, OFF, a decision file) is its own, never
committed: merged between lanes it would only conflict. A sub-project's
``.autopilot/`` at any depth is left out too: it holds the files of runs in that
folder, as much a lane's own as the top one."""


def commit_work(lane: Repository, message: str) -> str | None:
    """Commit everything in the lane's work tree (``.gitignore`` honoured, every
    ``.autopilot/`` folder left out) on its branch; returns HEAD afterwards (None before a
    first commit).

    Raises:
        RepositoryError: git refused the commit.
    """
    lane.out("add", "--all", "--", ".", *OWN_FILES)
    if lane.run("diff", "--cached", "--quiet").returncode != 0:
        done = lane.run("commit", "--quiet", "--no-verify", "-m", message, env=AUTOPILOT_IDENTITY)
        if done.returncode != 0:
            raise RepositoryError(f"cannot commit the lane's work: {first_line(done.stderr)}")
    return lane.head()


def land(
    lane: Repository,
    integration: Repository,
    lock_path: Path,
    *,
    lane_run_id: str,
    item_id: str,
    attempt: int,
) -> Merged:
    """Merge the lane's work for ``item_id`` into the run branch, one lane at a time.

    Args:
        lane: The lane's worktree.
        integration: The run's worktree, on the run branch.
        lock_path: The run's merge lock file.
        lane_run_id: The lane's run id (it names the kept ref on a conflict).
        item_id: The completed item.
        attempt: Its attempt (it names the kept ref on a conflict).

    Raises:
        RepositoryError: git failed in a way that is not a conflict, or the merge lock
            was held for ``MERGE_LOCK_TIMEOUT_SECONDS``.
    """
    tip = commit_work(lane, f"autopilot: work item {item_id}")
    if tip is None:
        raise RepositoryError(f"{lane.top} has no commit to merge")
    lock = FileLock(lock_path, timeout_seconds=MERGE_LOCK_TIMEOUT_SECONDS)
    if not lock.acquire():
        raise RepositoryError(f"the run's merge lock {lock_path} is held; not merged")
    try:
        # A merge a crashed lane left half done is undone first.
        integration.run("merge", "--abort")
        integration.out("reset", "--quiet", "--hard", "HEAD")
        message = f"autopilot: merge work item {item_id} ({lane_run_id})"
        done = integration.run(
            "merge", "--no-ff", "--no-edit", "-m", message, tip, env=AUTOPILOT_IDENTITY
        )
        conflicts: tuple[str, ...] = ()
        if done.returncode != 0:
            unmerged = integration.out("diff", "--name-only", "-z", "--diff-filter=U")
            conflicts = tuple(split_z(unmerged)) or (first_line(done.stdout + done.stderr),)
            integration.run("merge", "--abort")
            integration.out("reset", "--quiet", "--hard", "HEAD")
            kept = f"refs/autopilot/{lane_run_id}/conflict-{item_id}-{attempt}"
            lane.out("update-ref", kept, tip)
        run_tip = integration.head()
    finally:
        lock.release()
    if run_tip is None:
        raise RepositoryError(f"{integration.top} has no commit")
    lane.out("reset", "--quiet", "--hard", run_tip)
    return Merged(None if conflicts else run_tip, conflicts)
