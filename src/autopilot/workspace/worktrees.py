"""A run's own git worktree and branch, so it never writes the user's checkout.

``--worktree`` runs work in ``<runs-root>/worktrees/<runId>`` on a new branch
``autopilot/<runId>`` started from the user's HEAD. Untracked or uncommitted files in
the user's checkout never block it; they only earn a warning that they are not in the
worktree (unrelated untracked files are a warning, not a refusal:
https://github.com/umputun/ralphex/issues/444). Several runs in one repository each get their own.
"""

from __future__ import annotations

from pathlib import Path

from msgspec import Struct

from autopilot.errors import RepositoryError
from autopilot.store.project_files import checkout_folder
from autopilot.workspace.repo import Repository, first_line, open_repository, split_z

BRANCH_PREFIX = "autopilot/"
WORKTREES_DIR = "worktrees"


def branch_for(run_id: str) -> str:
    """The branch a ``--worktree`` run works on: ``autopilot/<runId>``."""
    return f"{BRANCH_PREFIX}{run_id}"


def worktree_path_for(runs_root: Path, run_id: str) -> Path:
    """Where a run's worktree goes: ``<runs-root>/worktrees/<runId>``."""
    return runs_root / WORKTREES_DIR / run_id


class RunWorktree(Struct, frozen=True):
    """A worktree made for a run.

    Attributes:
        path: Its directory.
        branch: Its branch (``autopilot/<runId>``).
        base: The commit it started from (the user's HEAD then).
        origin: The top of the checkout it was made from.
    """

    path: Path
    branch: str
    base: str
    origin: Path

    def to_json(self) -> dict[str, str]:
        """For ``state.json`` and events."""
        return {
            "path": str(self.path),
            "branch": self.branch,
            "base": self.base,
            "origin": str(self.origin),
        }

    @classmethod
    def from_json(cls, data: object) -> RunWorktree | None:
        """From ``to_json`` output; None when absent or malformed."""
        if not isinstance(data, dict):
            return None
        fields = [data.get(key) for key in ("path", "branch", "base", "origin")]
        if not all(isinstance(value, str) and value for value in fields):
            return None
        path, branch, base, origin = (str(value) for value in fields)
        return cls(Path(path), branch, base, Path(origin))


def project_home(cwd: Path, worktree: RunWorktree | None) -> Path:
    """Where a run's project files live: its backlog (``.autopilot/tasks.jsonl``) and
    approved run boundary, the files a person edits while the run goes on.

    For a ``--worktree`` run that is the same subdirectory of the user's checkout
    (``worktree.origin``) as ``cwd`` is of the worktree: the checkout's backlog is the
    one queue the user edits and every run of it claims items from. Otherwise ``cwd``.
    """
    if worktree is None:
        return cwd
    return checkout_folder(cwd, worktree.path, worktree.origin)


class WorktreeEntry(Struct, frozen=True):
    """One line of ``git worktree list``.

    Attributes:
        path: The worktree's directory.
        head: Its HEAD commit (None before a first commit).
        branch: Its branch's short name, None when detached.
        prunable: Its directory is gone (git's "prunable").
        main: It is the repository's main working tree.
    """

    path: Path
    head: str | None
    branch: str | None
    prunable: bool
    main: bool


def branch_exists(repo: Repository, branch: str) -> bool:
    """True if ``refs/heads/<branch>`` exists."""
    return repo.run("show-ref", "--verify", "--quiet", f"refs/heads/{branch}").returncode == 0


def create_worktree(
    origin: Repository, path: Path, run_id: str, start: str | None = None
) -> tuple[RunWorktree, list[str]]:
    """Make ``path`` a worktree on a new branch ``autopilot/<run_id>`` at HEAD.

    Args:
        origin: The user's checkout (left as it is: no file, ref or index changes
            besides the new branch).
        path: The new worktree's directory; it must not exist, nor lie inside
            ``origin``.
        run_id: The run.
        start: Start from this branch instead of HEAD (a lane of a parallel run
            starts from the run branch).

    Returns:
        The worktree, and warnings for the user (changes in the checkout that the
        worktree does not carry).

    Raises:
        RepositoryError: no commit yet, the branch or the path exists, or the path is
            inside the checkout.
        GitCommandError, GitUnavailableError: git failed.
    """
    head = origin.head()
    if head is None:
        raise RepositoryError(
            f"{origin.top} has no commits yet; commit once before running in a worktree"
        )
    if start is not None:
        head = origin.text("rev-parse", "--verify", "--quiet", f"refs/heads/{start}^{{commit}}")
    branch = branch_for(run_id)
    if branch_exists(origin, branch):
        raise RepositoryError(f"branch {branch} already exists in {origin.top}")
    if path.exists() or path.is_symlink():
        raise RepositoryError(f"worktree path {path} already exists")
    resolved = path.parent.resolve() / path.name
    if resolved == origin.top or origin.top in resolved.parents:
        raise RepositoryError(f"worktree path {path} is inside the checkout {origin.top}")
    resolved.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    done = origin.run("worktree", "add", "--quiet", "-b", branch, str(resolved), head)
    if done.returncode != 0:
        raise RepositoryError(
            f"cannot create a worktree at {resolved}: {first_line(done.stderr) or 'git failed'}"
        )
    left_behind = _left_behind(origin, head) if start is None else []
    return RunWorktree(resolved, branch, head, origin.top), left_behind


def _left_behind(origin: Repository, head: str) -> list[str]:
    """Warnings about uncommitted work in the checkout the new worktree does not have."""
    changed = origin.dirty_paths(untracked=False)
    untracked = len(origin.dirty_paths()) - len(changed)
    parts = []
    if changed:
        parts.append(f"{len(changed)} uncommitted change{'s' if len(changed) != 1 else ''}")
    if untracked > 0:
        parts.append(f"{untracked} untracked file{'s' if untracked != 1 else ''}")
    if not parts:
        return []
    verb = "is" if len(changed) + untracked == 1 else "are"
    return [
        f"{' and '.join(parts)} in {origin.top} {verb} not in the worktree "
        f"(it starts from HEAD {head[:12]})"
    ]


def list_worktrees(repo: Repository) -> list[WorktreeEntry]:
    """Every worktree of the repository, the main one first.

    Raises:
        GitCommandError, GitUnavailableError: git failed.
    """
    entries: list[WorktreeEntry] = []
    fields: dict[str, str] = {}

    def flush() -> None:
        if "worktree" in fields:
            branch = fields.get("branch")
            entries.append(
                WorktreeEntry(
                    path=Path(fields["worktree"]),
                    head=fields.get("HEAD") or None,
                    branch=branch.removeprefix("refs/heads/") if branch else None,
                    prunable="prunable" in fields,
                    main=not entries and "bare" not in fields,
                )
            )
        fields.clear()

    data = repo.out("worktree", "list", "--porcelain", "-z")
    for item in data.decode("utf-8", "surrogateescape").split("\0"):
        if not item:
            flush()
            continue
        key, _, value = item.partition(" ")
        fields[key] = value
    flush()
    return entries


def run_worktrees(repo: Repository) -> list[WorktreeEntry]:
    """The worktrees on ``autopilot/…`` branches."""
    return [
        entry
        for entry in list_worktrees(repo)
        if not entry.main and entry.branch and entry.branch.startswith(BRANCH_PREFIX)
    ]


def run_branches(repo: Repository) -> list[str]:
    """Every ``autopilot/…`` branch, by short name."""
    data = repo.out(
        "for-each-ref", "--format=%(refname:short)%00", f"refs/heads/{BRANCH_PREFIX.rstrip('/')}"
    )
    return [name.strip() for name in split_z(data) if name.strip()]


def remove_worktree(repo: Repository, path: Path) -> None:
    """Remove a worktree whose files are all committed (or whose directory is gone);
    autopilot's own files in it (``.autopilot/``, the memory file say) go with it.

    Raises:
        RepositoryError: it has uncommitted or untracked files of the user's work
            (the files stay), or is not a worktree of the repository.
    """
    if path.is_dir():
        try:
            own = open_repository(path)
        except RepositoryError:
            own = None  # not a work tree: git's own refusal below says why
        # A folder whose .git is gone would be read as part of an enclosing repository.
        same = own is not None and own.top == path.resolve()
        unsaved = own.dirty_paths(work_only=True) if own is not None and same else []
        if unsaved:
            raise RepositoryError(
                f"worktree {path} was kept: it has {len(unsaved)} uncommitted file(s)"
            )
    done = repo.run("worktree", "remove", "--force", str(path))
    if done.returncode != 0:
        raise RepositoryError(
            f"worktree {path} was kept: {first_line(done.stderr) or 'git refused to remove it'}"
        )


def branch_is_merged(repo: Repository, branch: str, into: str = "HEAD") -> bool:
    """True if every commit of ``branch`` is in ``into`` (by ancestry or as an
    equivalent patch, as after ``merge --rebase``)."""
    if repo.run("merge-base", "--is-ancestor", f"refs/heads/{branch}", into).returncode == 0:
        return True
    done = repo.run("cherry", into, f"refs/heads/{branch}")
    lines = done.stdout.decode("utf-8", "replace").split("\n")
    return done.returncode == 0 and not any(line.startswith("+") for line in lines)


def delete_branch(repo: Repository, branch: str) -> None:
    """Delete ``branch`` (the caller has checked it is merged or not wanted).

    Raises:
        RepositoryError: git refused (e.g. the branch is checked out somewhere).
    """
    done = repo.run("branch", "--delete", "--force", "--quiet", branch)
    if done.returncode != 0:
        raise RepositoryError(
            f"branch {branch} was kept: {first_line(done.stderr) or 'git refused to delete it'}"
        )


def restore_run_branch(repo: Repository, branch: str) -> str | None:
    """Bring back a run's branch an agent deleted, so its commits stay reachable.

    The branch is made again at the work tree's HEAD commit: HEAD itself when it is
    detached (or on another branch), else the last commit HEAD's reflog names (HEAD
    still names the deleted branch: git logs its deletion there). A HEAD that was
    detached or left on the deleted branch is put back on it (the files do not
    change); one on another branch the agent chose is left there.

    Args:
        repo: The run's worktree.
        branch: Its branch (``autopilot/<runId>``).

    Returns:
        What was done, in one line, for a ``warning`` event; None when the branch is
        there (or no commit is known to make it at).
    """
    if branch_exists(repo, branch):
        return None
    on = repo.branch()
    sha = repo.head() or _last_logged_head(repo)
    if sha is None:
        return None
    done = repo.run(
        "update-ref",
        "-m",
        "autopilot: the run's branch, deleted, made again",
        f"refs/heads/{branch}",
        sha,
        "",
    )
    if done.returncode != 0:
        return f"the run's branch {branch} was deleted and cannot be made again: " + first_line(
            done.stderr
        )
    if on is None or on == branch:
        repo.run("symbolic-ref", "HEAD", f"refs/heads/{branch}")
        return f"the run's branch {branch} was deleted; made again at {sha[:12]}, checked out"
    return f"the run's branch {branch} was deleted; made again at {sha[:12]} (HEAD is on {on})"


def _last_logged_head(repo: Repository) -> str | None:
    """The newest commit HEAD's reflog names that still exists, or None."""
    path = repo.git_dir / "logs" / "HEAD"
    try:
        lines = path.read_bytes().decode("ascii", "replace").splitlines()[-64:]
    except OSError:
        return None
    for line in reversed(lines):
        for sha in reversed(line.split(" ", 2)[:2]):
            if len(sha) >= 40 and sha.strip("0"):
                found = repo.run("rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}")
                if found.returncode == 0:
                    return sha
    return None
