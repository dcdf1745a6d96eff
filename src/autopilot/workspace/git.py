"""Git observations for one iteration: HEAD, the working-tree fingerprint, commits.

Plain ``git`` calls (argv lists, no shell). Dirty checks use ``git status
--porcelain`` and never count stashes (field report 24). A commit is progress
(field report 7). Outside a git repository every answer is "unknown".
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

_GIT_TIMEOUT_SECONDS = 60
_MAX_COMMITS = 200


@dataclass(frozen=True)
class TreeMark:
    """Where the work tree stood at one moment.

    Attributes:
        head: The HEAD commit sha, or None (no repo, or no commit yet).
        entries: Each path ``git status --porcelain`` lists → its status code and a
            digest of its content; None outside a repository.
        branch: The checked-out branch's short name (None: detached, or unknown).
    """

    head: str | None
    entries: dict[str, str] | None
    branch: str | None = None

    @property
    def fingerprint(self) -> str | None:
        """One digest of all entries (None outside a repository)."""
        if self.entries is None:
            return None
        digest = hashlib.sha256()
        for path in sorted(self.entries):
            digest.update(f"{path}\0{self.entries[path]}\0".encode("utf-8", "surrogateescape"))
        return digest.hexdigest()


@dataclass(frozen=True)
class Commit:
    """A commit the agent made: full sha, subject line and trailer lines."""

    sha: str
    subject: str
    trailers: tuple[str, ...]


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    try:
        return subprocess.run(
            ["git", "-c", "core.quotepath=off", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def work_tree_root(cwd: Path) -> Path:
    """The top of the git work tree holding ``cwd``, or ``cwd`` outside a repository."""
    done = _git(cwd, "rev-parse", "--show-toplevel")
    if done is not None and done.returncode == 0 and done.stdout.strip():
        return Path(done.stdout.decode("utf-8", "surrogateescape").strip())
    return cwd


def is_repository(cwd: Path) -> bool:
    """True if ``cwd`` is inside a git work tree."""
    done = _git(cwd, "rev-parse", "--is-inside-work-tree")
    return done is not None and done.returncode == 0 and done.stdout.strip() == b"true"


_FIELDS_BEFORE_PATH = {b"1": 8, b"2": 9, b"u": 10}


def mark(cwd: Path) -> TreeMark:
    """Record HEAD and every changed or untracked path of ``cwd`` with its content.

    One ``git status --porcelain=v2 -z --branch`` gives both; outside a repository
    it fails and the mark is "unknown".
    """
    status = _git(cwd, "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all")
    if status is None or status.returncode != 0:
        return TreeMark(None, None)
    head: str | None = None
    branch: str | None = None
    entries: dict[str, str] = {}
    records = iter(status.stdout.split(b"\0"))
    for record in records:
        kind = record[:1]
        if record.startswith(b"# branch.oid "):
            oid = record[len(b"# branch.oid ") :].decode("ascii", "replace")
            head = None if oid == "(initial)" else oid
            continue
        if record.startswith(b"# branch.head "):
            name = record[len(b"# branch.head ") :].decode("utf-8", "surrogateescape")
            branch = None if name == "(detached)" else name
            continue
        if kind == b"?":
            code, raw_path = "??", record[2:]
        elif kind in _FIELDS_BEFORE_PATH:
            parts = record.split(b" ", _FIELDS_BEFORE_PATH[kind])
            if len(parts) <= _FIELDS_BEFORE_PATH[kind]:
                continue
            code, raw_path = parts[1].decode("ascii", "replace"), parts[-1]
            if kind == b"2":
                next(records, None)  # the rename's source path
        else:
            continue
        path = raw_path.decode("utf-8", "surrogateescape")
        entries[path] = f"{code}:{_file_digest(cwd / path)}"
    return TreeMark(head, entries, branch)


def _file_digest(path: Path) -> str:
    """A digest of a changed path's content, never blocking or leaving the tree: a
    symlink is named by its target, a FIFO or device is not opened for reading."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        if error.errno != errno.ELOOP:
            return "missing"
        try:
            return "link:" + hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()
        except OSError:
            return "missing"
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            return "dir"
        if not stat.S_ISREG(mode):
            return "special"
        digest = hashlib.sha256()
        try:
            while chunk := handle.read(1024 * 1024):
                digest.update(chunk)
        except OSError:
            return "unreadable"
    return digest.hexdigest()


def changed_files(cwd: Path, before: TreeMark, after: TreeMark) -> int | None:
    """How many paths differ between the two marks: committed in between, or
    changed in the work tree (a path already dirty before counts only if its
    content or status changed). None outside a repository."""
    paths = changed_paths(cwd, before, after)
    return None if paths is None else len(paths)


def changed_paths(cwd: Path, before: TreeMark, after: TreeMark) -> list[str] | None:
    """The paths that differ between the two marks (see ``changed_files``), sorted;
    None outside a repository."""
    if after.entries is None:
        return None
    names: set[str] = set()
    if before.head and after.head and before.head != after.head:
        done = _git(cwd, "diff", "--name-only", "-z", before.head, after.head)
        if done is not None and done.returncode == 0:
            names.update(n.decode("utf-8", "replace") for n in done.stdout.split(b"\0") if n)
    old = before.entries or {}
    for path in set(old) | set(after.entries):
        if old.get(path) != after.entries.get(path):
            names.add(path)
    return sorted(names)


def commits_between(cwd: Path, before: str | None, after: str | None) -> list[Commit]:
    """Commits reachable from ``after`` but not ``before``, oldest first (at most 200)."""
    if after is None or before == after:
        return []
    span = after if before is None else f"{before}..{after}"
    done = _git(
        cwd,
        "log",
        "--reverse",
        f"--max-count={_MAX_COMMITS}",
        "--format=%H%x1f%s%x1f%(trailers:only,unfold)%x1e",
        span,
    )
    if done is None or done.returncode != 0:
        return []
    commits = []
    for record in done.stdout.decode("utf-8", "replace").split("\x1e"):
        parts = record.strip("\n").split("\x1f")
        if len(parts) < 2 or not parts[0]:
            continue
        trailers = tuple(t for t in (parts[2] if len(parts) > 2 else "").splitlines() if t)
        commits.append(Commit(parts[0].strip(), parts[1], trailers[:8]))
    return commits
