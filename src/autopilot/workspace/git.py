"""Git observations for one iteration: HEAD, the work tree, the branches, new commits.

Every call goes through ``workspace.repo.run_git``: an argv list with hooks and
fsmonitor off, no optional locks (the user's index is never rewritten), no terminal
prompt, and a timeout, so nothing a repository's config plants (an agent can write
``core.fsmonitor`` into ``.git/config``) runs inside autopilot's own calls or stalls
them; a call that times out is a warning and an unknown answer, never a crash.
Whether the work tree is a repository is decided once, when a ``GitObserver`` is
made (first by looking for ``.git`` up the path, without git): outside one, no git
process runs at all and every answer is "unknown".

Dirty checks use ``git status --porcelain`` and never count stashes. A commit is
progress (an agent that commits leaves a clean tree:
https://github.com/frankbria/ralph-claude-code/issues/141) wherever the agent made it:
on the checked-out branch, on another branch, or on a detached HEAD it left again. A mark
records the tip of every local branch, HEAD and HEAD's recent reflog, so a commit
reachable from any of them after the iteration and from none before is new.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

from msgspec import Struct, field

from autopilot.core.digest import sha256, sha256_hex
from autopilot.errors import AutopilotError
from autopilot.workspace.filters import FilterGuard
from autopilot.workspace.ref_files import read_tips
from autopilot.workspace.repo import git_environment, run_git
from autopilot.workspace.work_tree import OBSERVE_TIMEOUT_SECONDS, find_work_tree

_MAX_COMMITS = 200
_MAX_REFLOG_ENTRIES = 1000


class TreeMark(Struct, frozen=True):
    """Where the work tree and its branches stood at one moment.

    Attributes:
        head: The HEAD commit sha, or None (no repo, or no commit yet).
        entries: Each path ``git status --porcelain`` lists → its status code, a
            digest of its content and ``:x`` if it is executable; None outside a
            repository.
        branch: The checked-out branch's short name (None: detached, or unknown).
        tips: The commits at the tips of local branches, HEAD and HEAD's latest
            1,000 reflog entries.
        tree_key: One digest of everything a checkpoint of the work tree is made
            from, as ``git status`` sees it: HEAD, each listed path's status record
            (its modes and index blob), content digest and executable bit. Two marks
            with the same key hold the same tree; None when the mark cannot vouch for
            it (outside a repository, or a listed path that is a folder, such as a
            submodule, a special file or an unreadable one). Not part of ``to_json``
            nor of equality.
    """

    head: str | None
    entries: dict[str, str] | None
    branch: str | None = None
    tips: frozenset[str] = field(default_factory=frozenset)
    tree_key: str | None = None

    def __eq__(self, other: object) -> bool:
        if type(other) is not TreeMark:
            return NotImplemented
        return (self.head, self.entries, self.branch, self.tips) == (
            other.head,
            other.entries,
            other.branch,
            other.tips,
        )

    def __hash__(self) -> int:
        entries = None if self.entries is None else frozenset(self.entries.items())
        return hash((self.head, entries, self.branch, self.tips))

    @property
    def fingerprint(self) -> str | None:
        """One digest of the entries and tips (None outside a repository): it changes
        with the work tree and with any new commit, on whatever branch."""
        if self.entries is None:
            return None
        digest = sha256()
        for path in sorted(self.entries):
            digest.update(f"{path}\0{self.entries[path]}\0".encode("utf-8", "surrogateescape"))
        for tip in sorted(self.tips):
            digest.update(f"tip\0{tip}\0".encode("ascii", "replace"))
        return digest.hexdigest()

    def to_json(self) -> dict[str, object]:
        """The mark as a JSON object (``from_json`` reads it back)."""
        return {"head": self.head, "branch": self.branch, "entries": self.entries}

    @classmethod
    def from_json(cls, data: object) -> TreeMark | None:
        """A mark ``to_json`` wrote, or None if ``data`` is not one."""
        if not isinstance(data, dict):
            return None
        head, branch, entries = data.get("head"), data.get("branch"), data.get("entries")
        if not (head is None or isinstance(head, str)):
            return None
        if not (branch is None or isinstance(branch, str)):
            return None
        if entries is not None and not (
            isinstance(entries, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in entries.items())
        ):
            return None
        return cls(head, entries, branch)


UNKNOWN = TreeMark(None, None)
"""The mark outside a repository, or when git could not answer."""


class Commit(Struct, frozen=True):
    """A commit the agent made: full sha, subject line and trailer lines."""

    sha: str
    subject: str
    trailers: tuple[str, ...]


def _git(
    cwd: Path,
    *args: str,
    input_bytes: bytes | None = None,
    timeout_seconds: float = OBSERVE_TIMEOUT_SECONDS,
    env: dict[str, str] | None = None,
    base_env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``run_git``; raises ``AutopilotError`` when git is missing or timed out."""
    return run_git(
        cwd,
        *args,
        env=env,
        input_bytes=input_bytes,
        timeout_seconds=timeout_seconds,
        base_env=base_env,
    )


_FIELDS_BEFORE_PATH = {b"1": 8, b"2": 9, b"u": 10}


class GitObserver:
    """What the driver asks git about one work tree (for ``workspace.marks.GitWorkspace``),
    with every failure a warning.

    Args:
        cwd: The work tree; whether it is a repository is decided here, once.
        timeout_seconds: The longest one call may take.
        filters_record: Where the run keeps the content filters it trusts
            (``workspace.filters.FilterGuard``), if it keeps them.

    Attributes:
        work_tree: The work tree's top and git directories (None: not a repository).
        repository: Whether it is a repository.
        filters: The content filters trusted (None outside a repository).
    """

    def __init__(
        self,
        cwd: Path,
        timeout_seconds: float = OBSERVE_TIMEOUT_SECONDS,
        filters_record: Path | None = None,
    ) -> None:
        self.cwd = cwd
        self.timeout_seconds = timeout_seconds
        self._warnings: list[str] = []
        # The work tree's top and git directories cannot change while a run watches it:
        # asked once, here.
        self.work_tree = find_work_tree(cwd)
        self.repository = self.work_tree is not None
        # The content filters of the repository now, before the agent runs: one it
        # plants later never runs in these calls (``workspace.filters``).
        self.filters = FilterGuard(cwd, filters_record, self.work_tree) if self.work_tree else None
        # Taken once: the driver's environment does not change while it runs.
        self._base_env = git_environment() if self.work_tree else None

    def take_warnings(self) -> list[str]:
        """Warnings since the last call (a git call that timed out or could not run)."""
        warnings, self._warnings = self._warnings, []
        return warnings

    def _run(self, *args: str, input_bytes: bytes | None = None) -> bytes | None:
        """stdout of a successful call; None (and a warning if git itself failed)."""
        env = self.filters.environment(self.cwd, args) if self.filters else None
        try:
            done = _git(
                self.cwd,
                *args,
                input_bytes=input_bytes,
                timeout_seconds=self.timeout_seconds,
                env=env or None,
                base_env=self._base_env,
            )
        except AutopilotError as error:
            self._warnings.append(f"{error}; progress and commits are unknown for now")
            return None
        return done.stdout if done.returncode == 0 else None

    def mark(self) -> TreeMark:
        """HEAD, every changed or untracked path with its content, and the tips.

        One ``git status --porcelain=v2 -z --branch`` gives HEAD and the paths; the
        tips are read from the ref files (``workspace.ref_files``) where git keeps
        them there, so a mark is one git process.
        """
        if not self.repository:
            return UNKNOWN
        # No ahead/behind count: the mark reads HEAD and the paths, and counting the
        # commits between a branch and its upstream walks history at every mark.
        status = self._run(
            "status",
            "--porcelain=v2",
            "-z",
            "--branch",
            "--no-ahead-behind",
            "--untracked-files=all",
        )
        if status is None:
            return UNKNOWN
        head, branch, entries, key = _parse_status(self.cwd, status)
        return TreeMark(head, entries, branch, self._tips(head), key)

    def _tips(self, head: str | None) -> frozenset[str]:
        tips = {head} if head else set()
        if self.work_tree is not None:
            read = read_tips(self.work_tree.git_dir, self.work_tree.common_dir, _MAX_REFLOG_ENTRIES)
            if read is not None:
                return frozenset(tips | read)
        refs = self._run("for-each-ref", "--format=%(objectname)", "refs/heads")
        reflog = self._run("reflog", "show", f"-n{_MAX_REFLOG_ENTRIES}", "--format=%H", "HEAD")
        for output in (refs, reflog):
            tips.update(line for line in (output or b"").decode("ascii", "replace").split())
        return frozenset(tips)

    def changed_files(self, before: TreeMark, after: TreeMark) -> int | None:
        """How many paths differ between the two marks: committed in between, or
        changed in the work tree (a path already dirty before counts only if its
        content or status changed). None outside a repository."""
        paths = self.changed_paths(before, after)
        return None if paths is None else len(paths)

    def changed_paths(self, before: TreeMark, after: TreeMark) -> list[str] | None:
        """The paths that differ between the two marks (see ``changed_files``),
        sorted; None outside a repository."""
        if after.entries is None:
            return None
        names: set[str] = set()
        if before.head and after.head and before.head != after.head:
            done = self._run("diff", "--name-only", "--no-renames", "-z", before.head, after.head)
            names.update(n.decode("utf-8", "replace") for n in (done or b"").split(b"\0") if n)
        old = before.entries or {}
        for path in set(old) | set(after.entries):
            if old.get(path) != after.entries.get(path):
                names.add(path)
        return sorted(names)

    def new_commits(self, before: TreeMark, after: TreeMark) -> list[Commit]:
        """Commits reachable from ``after``'s tips and from none of ``before``'s,
        oldest first (at most 200): on any branch, or on a detached HEAD since left."""
        if after.entries is None or before.entries is None or not after.tips - before.tips:
            return []
        revisions = [*sorted(after.tips), *(f"^{tip}" for tip in sorted(before.tips))]
        done = self._run(
            "log",
            "--topo-order",  # parents first whatever the timestamps (--reverse below)
            "--reverse",
            "--ignore-missing",  # a tip whose commit is gone (pruned) is no revision
            f"--max-count={_MAX_COMMITS}",
            "--format=%H%x1f%s%x1f%(trailers:only,unfold)%x1e",
            "--stdin",
            input_bytes="".join(f"{rev}\n" for rev in revisions).encode("ascii", "replace"),
        )
        commits = []
        for record in (done or b"").decode("utf-8", "replace").split("\x1e"):
            parts = record.strip("\n").split("\x1f")
            if len(parts) < 2 or not parts[0]:
                continue
            trailers = tuple(t for t in (parts[2] if len(parts) > 2 else "").splitlines() if t)
            commits.append(Commit(parts[0].strip(), parts[1], trailers[:8]))
        return commits


def _parse_status(
    cwd: Path, output: bytes
) -> tuple[str | None, str | None, dict[str, str], str | None]:
    """HEAD, the branch, each listed path → ``code:digest``, and the tree key (see
    ``TreeMark.tree_key``) from ``git status --porcelain=v2 -z --branch`` output."""
    head: str | None = None
    branch: str | None = None
    entries: dict[str, str] = {}
    key = sha256()
    vouched = True
    records = iter(output.split(b"\0"))
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
                key.update(next(records, b"") + b"\0")  # the rename's source path
        else:
            continue
        path = raw_path.decode("utf-8", "surrogateescape")
        digest, executable = _file_facts(cwd / path)
        # The executable bit too: a chmod of an untracked (or already changed) file
        # leaves its status code and content as they were.
        entries[path] = f"{code}:{digest}:x" if executable else f"{code}:{digest}"
        vouched = vouched and executable is not None
        key.update(b"%s\0%s\0%r\0" % (record, digest.encode("ascii"), executable))
    key.update(f"head\0{head or ''}".encode("ascii", "replace"))
    return head, branch, entries, key.hexdigest() if vouched else None


def _file_facts(path: Path) -> tuple[str, bool | None]:
    """A digest of a changed path's content, never blocking or leaving the tree (a
    symlink is named by its target, a FIFO or device is not opened for reading), and
    whether it is an executable regular file: None when the digest does not tell
    what a checkpoint would take (a folder listed: a submodule or a nested repository,
    whose commit it records; a FIFO or device; a file that exists but cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR):
            return "missing", False
        if error.errno != errno.ELOOP:
            return "missing", None
        try:
            return "link:" + sha256_hex(os.fsencode(os.readlink(path))), False
        except OSError:
            return "missing", None
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        return "unreadable", None
    if not stat.S_ISREG(mode):  # a folder cannot be opened as a file object
        os.close(fd)
        return ("dir" if stat.S_ISDIR(mode) else "special"), None
    with os.fdopen(fd, "rb") as handle:
        digest = sha256()
        try:
            while chunk := handle.read(1024 * 1024):
                digest.update(chunk)
        except OSError:
            return "unreadable", None
    return digest.hexdigest(), bool(mode & stat.S_IXUSR)
