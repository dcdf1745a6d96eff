"""Branch tips and HEAD's reflog read from the repository's files, without git.

A mark (``workspace.git``) needs the commit at the tip of every local branch and the
commits of HEAD's recent reflog. In a repository with git's default ``files`` ref
storage these are plain files (``git help gitrepository-layout``): a loose ref
``refs/heads/<name>`` holds its sha (or ``ref: <target>``, a symbolic ref), the
``packed-refs`` file lists ``<sha> <refname>`` lines (``#`` a header, ``^`` the peeled
object of the tag above), and ``logs/HEAD`` holds one ``<old> <new> <identity>\\t<message>``
line per change of HEAD, oldest first. git writes each through a lock file and a
rename, so a reader sees a whole file, old or new. Reading them spares a mark two git
processes per call. A repository that keeps its refs another way (``reftable``, git
2.45) is read by git instead: ``read_tips`` then says None.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_SHA = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_NULL = re.compile(rb"0+")
_REFLOG_TAIL_BYTES = 1 << 20
"""How much of the end of ``logs/HEAD`` is read (1,000 entries take about 200 KB)."""


def read_tips(git_dir: Path, common_dir: Path, reflog_entries: int) -> frozenset[str] | None:
    """The shas at the tips of ``refs/heads/*`` and of HEAD's latest reflog entries.

    Args:
        git_dir: The work tree's git directory (its ``logs/HEAD``).
        common_dir: The repository's shared git directory (``refs``, ``packed-refs``).
        reflog_entries: How many of HEAD's latest reflog entries count.

    Returns:
        The shas; None when the refs are not stored as files (reftable) or cannot be
        read (the caller asks git then).
    """
    common = os.fspath(common_dir)  # plain strings: a mark reads these every iteration
    if os.path.exists(os.path.join(common, "reftable")):
        return None
    if not os.path.isdir(os.path.join(common, "refs")):
        return None
    try:
        branches = _loose_heads(os.path.join(common, "refs", "heads"))
        # Loose refs before packed-refs: ``git pack-refs`` writes packed-refs before it
        # deletes the loose files, so a ref being packed is seen in one or the other.
        for name, sha in _packed_heads(os.path.join(common, "packed-refs")).items():
            branches.setdefault(name, sha)
        reflog = _reflog_news(os.path.join(os.fspath(git_dir), "logs", "HEAD"), reflog_entries)
    except OSError:
        return None
    return frozenset(sha.decode("ascii") for sha in (*branches.values(), *reflog))


def _loose_heads(folder: str, prefix: str = "") -> dict[str, bytes]:
    """``refs/heads``' loose refs under ``folder``, by name (``prefix`` + file name)."""
    found: dict[str, bytes] = {}
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return found
    for entry in entries:
        name = prefix + entry.name
        if entry.is_dir(follow_symlinks=False):
            found.update(_loose_heads(entry.path, name + "/"))
            continue
        if entry.name.endswith(".lock"):
            continue
        content = _read_head(entry.path)
        if content is not None and _SHA.fullmatch(content):
            found[name] = content
    return found


def _read_head(path: str) -> bytes | None:
    """A loose ref file's first 200 bytes, stripped; None if it is gone (packed or
    deleted meanwhile) or is a folder."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, IsADirectoryError):
        return None
    try:
        return os.read(fd, 200).strip()
    except IsADirectoryError:
        return None
    finally:
        os.close(fd)


def _packed_heads(path: str) -> dict[str, bytes]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return {}
    found: dict[str, bytes] = {}
    for line in data.splitlines():
        sha, _, name = line.partition(b" ")
        if name.startswith(b"refs/heads/") and _SHA.fullmatch(sha):
            found[name[len(b"refs/heads/") :].decode("utf-8", "surrogateescape")] = sha
    return found


def _reflog_news(path: str, entries: int) -> list[bytes]:
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - _REFLOG_TAIL_BYTES)
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return []
    lines = data.splitlines()
    if start > 0:
        lines = lines[1:]  # the first line read may be cut
    news = []
    for line in lines[-entries:] if entries > 0 else []:
        fields = line.split(b" ", 2)
        if len(fields) == 3 and _SHA.fullmatch(fields[1]) and not _NULL.fullmatch(fields[1]):
            news.append(fields[1])
    return news
