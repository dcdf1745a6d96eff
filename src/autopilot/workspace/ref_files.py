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
    if (common_dir / "reftable").exists() or not (common_dir / "refs").is_dir():
        return None
    try:
        branches = _loose_heads(common_dir / "refs" / "heads")
        # Loose refs before packed-refs: ``git pack-refs`` writes packed-refs before it
        # deletes the loose files, so a ref being packed is seen in one or the other.
        for name, sha in _packed_heads(common_dir / "packed-refs").items():
            branches.setdefault(name, sha)
        reflog = _reflog_news(git_dir / "logs" / "HEAD", reflog_entries)
    except OSError:
        return None
    return frozenset(sha.decode("ascii") for sha in (*branches.values(), *reflog))


def _loose_heads(folder: Path) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for top, _dirs, names in os.walk(folder):
        for name in names:
            if name.endswith(".lock"):
                continue
            path = os.path.join(top, name)
            try:
                with open(path, "rb") as handle:
                    content = handle.read(200).strip()
            except (FileNotFoundError, IsADirectoryError):
                continue  # deleted or packed meanwhile
            if _SHA.fullmatch(content):
                found[os.path.relpath(path, folder)] = content
    return found


def _packed_heads(path: Path) -> dict[str, bytes]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    found: dict[str, bytes] = {}
    for line in data.splitlines():
        sha, _, name = line.partition(b" ")
        if name.startswith(b"refs/heads/") and _SHA.fullmatch(sha):
            found[name[len(b"refs/heads/") :].decode("utf-8", "surrogateescape")] = sha
    return found


def _reflog_news(path: Path, entries: int) -> list[bytes]:
    try:
        with path.open("rb") as handle:
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
