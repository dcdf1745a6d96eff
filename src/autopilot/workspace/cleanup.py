"""What a pruned run leaves in git: its worktree, its checkpoint refs, its branch.

``prune`` keeps a run whose worktree holds uncommitted files (``unsaved_work``; its
``.autopilot/`` folder, the memory file say, is autopilot's, not the user's work), and
otherwise removes the worktree and the ``refs/autopilot/<runId>/`` refs; with
``--branches`` it also deletes the run's branch once every commit of it is in the
checkout's current branch (or ``autopilot merge`` merged it and it has not moved
since). A branch with commits found nowhere else is never deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autopilot.errors import AutopilotError
from autopilot.store.rundir import RunDir
from autopilot.workspace.repo import Repository, open_repository
from autopilot.workspace.run_workspace import RunPlace, checkpoints_of
from autopilot.workspace.scratch import leftovers, scratch_root
from autopilot.workspace.worktrees import (
    BRANCH_PREFIX,
    WORKTREES_DIR,
    branch_exists,
    branch_is_merged,
    delete_branch,
    remove_worktree,
    run_branches,
    run_worktrees,
)


@dataclass
class Cleanup:
    """What was removed from git for one run, and what was kept and why (lines).

    ``blocked`` is set when the run's worktree could not be removed: the run's folder
    then stays too, so the worktree is never left without its run.
    """

    done: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    blocked: bool = False


def _open_quietly(path: Path | str | None) -> Repository | None:
    if path is None or not str(path):
        return None
    try:
        return open_repository(Path(path))
    except AutopilotError:
        return None


def unsaved_work(place: RunPlace) -> str | None:
    """Why a run's worktree must stay (uncommitted or untracked files of the user's
    work, ``.autopilot/`` left out), or None."""
    if place.worktree is None:
        return None
    repo = _open_quietly(place.worktree.path)
    if repo is None:
        return None
    try:
        dirty = repo.dirty_paths(work_only=True)
    except AutopilotError as error:
        return f"its worktree {place.worktree.path} cannot be checked ({error})"
    if not dirty:
        return None
    return f"its worktree {place.worktree.path} has {len(dirty)} uncommitted file(s)"


def clean_up_run(run_dir: Path, place: RunPlace, *, branches: bool) -> Cleanup:
    """Remove the run's worktree and checkpoint refs (and merged branch, ``branches``).

    Never raises for git's refusals: they are reported in ``Cleanup.kept``.
    """
    result = Cleanup()
    worktree = place.worktree
    repo = (
        (_open_quietly(worktree.origin) or _open_quietly(worktree.path))
        if worktree
        else _open_quietly(place.cwd)
    )
    if repo is None:
        return result
    if worktree is not None:
        try:
            remove_worktree(repo, worktree.path)
            result.done.append(f"removed worktree {worktree.path}")
        except AutopilotError as error:
            result.kept.append(str(error))
            result.blocked = True
            return result
    try:
        deleted = checkpoints_of(run_dir, repo).delete_all()
        if deleted:
            result.done.append(f"deleted {deleted} checkpoint refs in {repo.top}")
    except AutopilotError as error:
        result.kept.append(f"checkpoint refs in {repo.top} were kept: {error}")
    if branches and worktree is not None and branch_exists(repo, worktree.branch):
        result_line = _delete_merged_branch(repo, worktree.branch, place.merged_tip)
        (result.done if result_line.startswith("deleted") else result.kept).append(result_line)
    return result


def _delete_merged_branch(repo: Repository, branch: str, merged_tip: str | None) -> str:
    tip = repo.run("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
    merged_as_is = tip.returncode == 0 and tip.stdout.decode().strip() == merged_tip
    if not (merged_as_is or branch_is_merged(repo, branch)):
        return (
            f"branch {branch} was kept: it has commits your branch does not "
            f"(git branch -D {branch} deletes it)"
        )
    try:
        delete_branch(repo, branch)
    except AutopilotError as error:
        return str(error)
    return f"deleted branch {branch}"


@dataclass
class Strandings:
    """Leftovers ``doctor`` reports: ``faults`` (worktrees of no run, broken ones) and
    ``notes`` (run branches whose run is gone, worktrees whose folder is gone)."""

    faults: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def find_strandings(runs_root: Path, here: Path) -> Strandings:
    """Worktrees under ``<runs-root>/worktrees`` without a run or a repository, a killed
    merge's temporary worktrees (``workspace.scratch``), and, if ``here`` is in a
    repository, its ``autopilot/…`` branches and worktrees whose run or folder is gone."""
    found = Strandings()
    for folder in leftovers(scratch_root(runs_root)):
        found.faults.append(
            f"worktree {folder / 'worktree'} is left over from a merge that was killed "
            "(the next autopilot merge or prune removes it)"
        )
    folder = runs_root / WORKTREES_DIR
    for entry in sorted(folder.iterdir()) if folder.is_dir() else ():
        if not RunDir(runs_root / entry.name).state.exists():
            found.faults.append(
                f"worktree {entry} belongs to no run "
                f"(git -C <your checkout> worktree remove {entry})"
            )
            continue
        try:
            open_repository(entry)
        except AutopilotError as error:
            found.faults.append(f"worktree {entry} is broken: {error}")
    repo = _open_quietly(here)
    if repo is None:
        return found
    try:
        for worktree in run_worktrees(repo):
            if worktree.prunable:
                found.notes.append(
                    f"worktree {worktree.path} of {worktree.branch} is gone (git worktree prune)"
                )
        for branch in run_branches(repo):
            run_id = branch[len(BRANCH_PREFIX) :]
            if not RunDir(runs_root / run_id).state.exists():
                found.notes.append(
                    f"branch {branch} in {repo.top}: its run is gone "
                    f"(merge it with git, or git branch -D {branch})"
                )
    except AutopilotError as error:
        found.notes.append(f"cannot list the worktrees of {repo.top}: {error}")
    return found
