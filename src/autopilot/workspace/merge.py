"""Merging a run's branch back into the user's branch, only when it applies cleanly.

The result is worked out first without touching the checkout: ``git merge-tree
--write-tree`` for a merge or a squash (git 2.38 or later), a rebase in a temporary
worktree for ``--rebase``. On a conflict nothing is changed and the conflicting files
are named; the run's branch is left for the user. autopilot's records on the branch
(``workspace.records``: the memory file, …) are never brought: the result keeps the
user's branch's (a commit on top puts them back after a fast-forward or a rebase).
A clean result is applied to the
checkout as a fast-forward of the user's branch: ``read-tree -m -u`` (which keeps the
user's other uncommitted changes) and then ``update-ref`` of the branch; it is refused
first if it would overwrite anything of the user's, an ignored file included
(``workspace.changes``). A caller's
``verify`` sees the result first, in a tree of its own (``verification_tree``), and
can refuse it before anything of the user's changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from autopilot.errors import AutopilotError, GitCommandError, MergeConflictError, RepositoryError
from autopilot.store.project_files import is_record
from autopilot.workspace.changes import in_the_way, tree_changes
from autopilot.workspace.records import record_changes, with_records
from autopilot.workspace.repo import Repository, first_line, open_repository, run_git, split_z
from autopilot.workspace.scratch import scratch_worktree


class MergeMode(StrEnum):
    """How a run's branch comes back: a merge commit (or a fast-forward), one squashed
    commit, or its commits replayed on top of the user's branch."""

    MERGE = "merge"
    SQUASH = "squash"
    REBASE = "rebase"


@dataclass(frozen=True)
class MergeResult:
    """What a merge did.

    Attributes:
        mode: How it merged.
        branch: The run's branch.
        into: The user's branch it went into.
        tip: The run's branch's commit that was merged.
        before: That branch's commit before.
        after: Its commit after (``before`` when there was nothing to merge).
        files: Paths the merge changed in the checkout.
        left_out: autopilot's records the branch changed, left as the user's branch
            has them (``workspace.records``).
    """

    mode: MergeMode
    branch: str
    into: str
    tip: str
    before: str
    after: str
    files: tuple[str, ...]
    left_out: tuple[str, ...] = ()

    @property
    def merged(self) -> bool:
        """False when the branch had nothing the user's branch lacked."""
        return self.after != self.before


def merge_back(
    checkout: Repository,
    branch: str,
    mode: MergeMode,
    *,
    message: str,
    verify: Callable[[str], None] | None = None,
    scratch: Path | None = None,
) -> MergeResult:
    """Merge ``branch`` into the branch checked out in ``checkout``.

    Args:
        checkout: The user's checkout.
        branch: The run's branch (short name).
        mode: Merge, squash or rebase.
        message: The commit message of a merge or squash commit.
        verify: Called with the commit the user's branch would move to, before
            anything of the user's changes; what it raises ends the merge there.
        scratch: Where a ``--rebase`` makes its temporary worktree
            (``workspace.scratch``; None: a private temporary folder).

    Raises:
        RepositoryError: detached HEAD, no commit yet, staged changes, the branch is
            missing or is the one checked out, uncommitted changes in files the merge
            would write, files git does not track (ignored ones) where it adds files,
            or git does not know the user's name; nothing was changed.
        MergeConflictError: the branch does not apply cleanly (the files are named);
            nothing was changed.
        GitCommandError, GitUnavailableError: git failed.
        Whatever ``verify`` raises; nothing was changed.
    """
    into = checkout.branch()
    if into is None:
        raise RepositoryError(
            f"HEAD is detached in {checkout.top}; check out the branch to merge into first"
        )
    if into == branch:
        raise RepositoryError(f"{branch} is checked out in {checkout.top}; check out another")
    head = checkout.head()
    if head is None:
        raise RepositoryError(f"{checkout.top} has no commits yet")
    tip = _tip(checkout, branch)
    if checkout.has_staged_changes():
        raise RepositoryError(
            f"the index of {checkout.top} has staged changes; commit or stash them before merging"
        )
    if _is_ancestor(checkout, tip, head):
        return MergeResult(mode, branch, into, tip, head, head, ())
    parents: list[str] | None = None  # of the commit made here, if one is
    if _is_ancestor(checkout, head, tip) and mode is not MergeMode.SQUASH:
        target = tip  # a fast-forward
    elif mode is MergeMode.REBASE:
        target = _rebased(checkout, branch, tip, head, scratch)
    else:
        tree = _merged_tree(checkout, branch, head, tip)
        if tree == checkout.text("rev-parse", f"{head}^{{tree}}"):
            return MergeResult(mode, branch, into, tip, head, head, ())  # e.g. squashed before
        parents = [head, tip] if mode is MergeMode.MERGE else [head]
        target = _commit(checkout, tree, parents, message)
    target, left_out = _without_records(checkout, branch, head, target, parents, message)
    if target == head:
        return MergeResult(mode, branch, into, tip, head, head, (), left_out)
    files = _applicable(checkout, head, target, branch)
    if verify is not None:
        verify(target)
    _apply(checkout, into, head, target, branch)
    return MergeResult(mode, branch, into, tip, head, target, files, left_out)


def _without_records(
    repo: Repository,
    branch: str,
    head: str,
    target: str,
    parents: list[str] | None,
    message: str,
) -> tuple[str, tuple[str, ...]]:
    """``target`` with autopilot's records (``workspace.records``) as ``head`` has them,
    and the records that differed: a merge or squash commit made here is made again
    without them, a commit of the branch (a fast-forward, a rebase) gets one on top
    that puts them back. ``head`` itself when the branch changed nothing else."""
    changes = record_changes(repo, target, head)
    if not changes:
        return target, ()
    left_out = tuple(change.path for change in changes)
    tree = with_records(repo, target, changes)
    if tree == repo.text("rev-parse", f"{head}^{{tree}}"):
        return head, left_out
    if parents is not None:
        return _commit(repo, tree, parents, message), left_out
    note = (
        f"Leave out autopilot's records of {branch}\n\n"
        f"{', '.join(left_out)}: the run's, not its work (they stay on {branch}).\n"
    )
    return _commit(repo, tree, [target], note), left_out


@contextlib.contextmanager
def verification_tree(
    repo: Repository, run_worktree: Path | None, target: str, *, scratch: Path | None = None
) -> Iterator[Path]:
    """A work tree holding exactly commit ``target`` (a merge's result), to run checks in.

    The run's own worktree when it is at ``target`` already with nothing uncommitted
    or untracked but autopilot's own files (a fast-forward: what the agent installed
    there, ignored by git, stays at hand); else a temporary detached worktree of
    ``repo`` under ``scratch`` (``workspace.scratch``), removed on leaving.
    Neither the user's checkout nor the run's worktree is changed.

    Raises:
        GitCommandError, GitUnavailableError: the temporary worktree cannot be made.
    """
    if run_worktree is not None and _holds_exactly(repo, run_worktree, target):
        yield run_worktree
        return
    with scratch_worktree(repo, target, kind="verify", root=scratch) as place:
        yield place


def _holds_exactly(repo: Repository, place: Path, target: str) -> bool:
    """Is ``place`` a clean work tree of ``repo`` at commit ``target``?"""
    try:
        own = open_repository(place)
        return (
            own.common_dir == repo.common_dir
            and own.head() == target
            and not own.dirty_paths(work_only=True)
        )
    except AutopilotError:
        return False


def _tip(repo: Repository, branch: str) -> str:
    done = repo.run("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}")
    sha = done.stdout.decode("ascii", "replace").strip()
    if done.returncode != 0 or not sha:
        raise RepositoryError(f"branch {branch} does not exist in {repo.top}")
    return sha


def _is_ancestor(repo: Repository, older: str, newer: str) -> bool:
    return repo.run("merge-base", "--is-ancestor", older, newer).returncode == 0


def _merged_tree(repo: Repository, branch: str, head: str, tip: str) -> str:
    done = repo.run("merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", head, tip)
    items = split_z(done.stdout)
    if done.returncode == 1 and items and all(is_record(path) for path in items[1:]):
        return items[0]  # its records, conflicts and all, are replaced by the user's
    if done.returncode == 1 and items:
        raise _conflict(branch, repo.top, items[1:])
    if done.returncode != 0 or not items:
        detail = first_line(done.stderr) or f"exit {done.returncode}"
        if "--write-tree" in detail or "unknown option" in detail:
            detail = "git 2.38 or later is needed to merge"
        raise GitCommandError(f"cannot merge {branch}: {detail}")
    return items[0]


def _conflict(branch: str, top: Path, files: list[str]) -> MergeConflictError:
    unique = tuple(dict.fromkeys(files))
    shown = ", ".join(unique[:10]) + (f" and {len(unique) - 10} more" if len(unique) > 10 else "")
    return MergeConflictError(
        f"{branch} does not apply cleanly to {top}: conflicts in {shown}; "
        f"nothing was changed and {branch} is kept",
        unique,
    )


def _commit(repo: Repository, tree: str, parents: list[str], message: str) -> str:
    args = ["commit-tree", "--no-gpg-sign", tree, "-F", "-"]
    for parent in parents:
        args += ["-p", parent]
    done = repo.run(*args, input_bytes=message.encode())
    if done.returncode != 0:
        raise _commit_error(repo, done.stderr)
    return done.stdout.decode("ascii", "replace").strip()


def _commit_error(repo: Repository, stderr: bytes) -> Exception:
    text = stderr.decode("utf-8", "replace")
    if "tell me who you are" in text or "identity" in text:
        return RepositoryError(
            f"git does not know who you are in {repo.top}: set user.name and user.email "
            "(git config) before merging; nothing was changed"
        )
    return GitCommandError(f"cannot commit the merge: {first_line(stderr) or 'git failed'}")


def _rebased(repo: Repository, branch: str, tip: str, head: str, scratch: Path | None) -> str:
    """The run's commits replayed onto ``head``, in a temporary worktree."""
    with scratch_worktree(repo, tip, kind="rebase", root=scratch) as place:
        done = run_git(
            place,
            "-c",
            "rebase.autoStash=false",
            "-c",
            "rebase.autoSquash=false",
            "-c",
            "rebase.updateRefs=false",
            "rebase",
            "--no-verify",
            "--quiet",
            head,
        )
        if done.returncode != 0:
            conflicted = split_z(
                run_git(place, "diff", "--name-only", "-z", "--diff-filter=U").stdout
            )
            run_git(place, "rebase", "--abort")
            text = done.stderr.decode("utf-8", "replace") + done.stdout.decode("utf-8", "replace")
            if not conflicted and ("tell me who you are" in text or "identity" in text):
                raise _commit_error(repo, done.stderr + done.stdout)
            if not conflicted:
                raise GitCommandError(
                    f"cannot rebase {branch}: {first_line(done.stderr) or 'git failed'}"
                )
            raise _conflict(branch, repo.top, conflicted)
        return run_git(place, "rev-parse", "HEAD").stdout.decode("ascii", "replace").strip()


def _applicable(repo: Repository, head: str, target: str, branch: str) -> tuple[str, ...]:
    """The paths moving the checkout from ``head`` to ``target`` changes, once sure it
    overwrites nothing of the user's: no uncommitted change to them, and no file git
    does not track (an ignored one, which ``read-tree`` would overwrite) where the
    merge adds one.

    Raises:
        RepositoryError: either is there (named); nothing was changed.
    """
    changes = tree_changes(repo, head, target)
    files = tuple(change.path for change in changes)
    dirty = set(repo.dirty_paths())
    overlap = [path for path in files if path in dirty]
    if overlap:
        raise RepositoryError(
            f"cannot merge {branch}: it changes {_files(overlap)} that "
            f"{'is' if len(overlap) == 1 else 'are'} modified or untracked in {repo.top} "
            f"({_some(overlap)}); commit, stash or move "
            f"{'it' if len(overlap) == 1 else 'them'} away first; nothing was changed"
        )
    blocked = in_the_way(repo.top, changes)
    if blocked:
        raise RepositoryError(
            f"files git does not track (ignored ones) in {repo.top} are where {branch} adds "
            f"files ({_some(blocked)}); move them away first; nothing was changed"
        )
    return files


def _files(paths: list[str]) -> str:
    return "a file" if len(paths) == 1 else f"{len(paths)} files"


def _some(paths: list[str], limit: int = 10) -> str:
    return ", ".join(paths[:limit]) + (" …" if len(paths) > limit else "")


def _apply(repo: Repository, into: str, head: str, target: str, branch: str) -> None:
    """Move the checkout from ``head`` to ``target`` (a descendant), files then branch."""
    done = repo.run("read-tree", "-m", "-u", head, target)
    if done.returncode != 0:
        raise RepositoryError(
            f"cannot update {repo.top}: {first_line(done.stderr) or 'git read-tree failed'}; "
            "nothing was changed"
        )
    update = repo.run(
        "update-ref", "-m", f"autopilot merge {branch}", f"refs/heads/{into}", target, head
    )
    if update.returncode != 0:
        raise _put_back(repo, into, head, target, first_line(update.stderr))


def _put_back(repo: Repository, into: str, head: str, target: str, why: str) -> GitCommandError:
    """The branch could not move (it moved meanwhile, or its ref is locked): the
    checkout's files go back from ``target`` to ``head``, keeping whatever else changed,
    and the error says so. Never a hint to move the branch by hand: a branch that moved
    holds someone's commits."""
    undone = repo.run("read-tree", "-m", "-u", target, head)
    if undone.returncode == 0:
        return GitCommandError(
            f"cannot move {into} in {repo.top} ({why or 'git update-ref failed'}); its files "
            "were put back and nothing was changed"
        )
    return GitCommandError(
        f"cannot move {into} in {repo.top} ({why or 'git update-ref failed'}) nor put its "
        f"files back ({first_line(undone.stderr) or 'git read-tree failed'}): they hold the "
        f"merge's result, commit {target[:12]}; git status shows how they differ from {into}"
    )
