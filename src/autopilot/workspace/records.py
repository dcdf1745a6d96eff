"""autopilot's records (``store.project_files.RECORD_NAMES``: the memory file, the
backlog, …) as git sees them: pathspecs that name or leave them out, the records in
which two trees differ, and a tree with the records of another.

``restore`` keeps the records as they are, ``diff`` leaves them out, and ``merge``
never brings a run branch's records into the user's branch (``docs/architecture.md``,
"Checkpoints and worktrees"). A ``--worktree`` run's ``.autopilot/`` folder holds an
``IGNORE_FILE`` listing them, so an agent's ``git add -A`` there leaves them out.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from msgspec import Struct

from autopilot.store.project_files import PROJECT_DIR, RECORD_NAMES
from autopilot.workspace.repo import Repository, split_z

RECORDS = tuple(f":(glob)**/{PROJECT_DIR}/{name}" for name in RECORD_NAMES)
"""Pathspecs naming the records, in a ``.autopilot/`` folder at any depth."""

NOT_RECORDS = tuple(f":(exclude,glob)**/{PROJECT_DIR}/{name}" for name in RECORD_NAMES)
"""Pathspecs leaving the records out (with nothing else given: every other path)."""

IGNORE_FILE = ".gitignore"
IGNORE_TEXT = (
    "# Written by autopilot in a --worktree run's worktree: its records here are the\n"
    "# run's, never committed (this file included).\n"
    + "".join(f"/{name}\n" for name in (IGNORE_FILE, *RECORD_NAMES))
)
"""What a ``--worktree`` run's ``.autopilot/.gitignore`` says (it ignores itself too, so
it never shows in ``git status`` nor in a commit)."""

_ZERO = "0" * 40


class RecordChange(Struct, frozen=True):
    """A record in which two trees differ.

    Attributes:
        path: Its path in the repository.
        mode: Its mode in the second tree (``100644``…), None when it has none there.
        sha: Its blob in the second tree, None when it has none there.
    """

    path: str
    mode: str | None
    sha: str | None


def record_changes(repo: Repository, old: str, new: str) -> tuple[RecordChange, ...]:
    """The records in which trees (or commits) ``old`` and ``new`` differ, as ``new``
    has them, sorted by path.

    Raises:
        GitCommandError, GitUnavailableError: git failed.
    """
    data = repo.out("diff-tree", "-r", "-z", "--no-renames", old, new, "--", *RECORDS)
    items = split_z(data)
    found = []
    for meta, path in zip(items[0::2], items[1::2], strict=False):
        parts = meta.lstrip(":").split()
        if len(parts) < 5:
            continue
        mode, sha = parts[1], parts[3]
        present = mode != "000000"
        found.append(RecordChange(path, mode if present else None, sha if present else None))
    return tuple(sorted(found, key=lambda change: change.path))


def with_records(
    repo: Repository, tree: str, changes: tuple[RecordChange, ...], index: Path | None = None
) -> str:
    """``tree`` with each record of ``changes`` as the change has it (removed where it
    has none); ``tree`` itself when ``changes`` is empty.

    Args:
        repo: The repository.
        tree: A tree (or commit).
        changes: From ``record_changes(repo, tree, other)``: ``other``'s records.
        index: A scratch index file to use (removed afterwards); None: a temporary one.

    Raises:
        GitCommandError, GitUnavailableError: git failed.
    """
    if not changes:
        return repo.text("rev-parse", f"{tree}^{{tree}}")
    lines = b"".join(
        (
            f"{change.mode} {change.sha}\t{change.path}"
            if change.mode and change.sha
            else f"0 {_ZERO}\t{change.path}"
        ).encode("utf-8", "surrogateescape")
        + b"\0"
        for change in changes
    )
    with contextlib.ExitStack() as stack:
        if index is None:
            import tempfile  # only a restore or merge that keeps records loads it

            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="autopilot-"))
            index = Path(folder) / "index"
        else:
            stack.callback(_remove, index)
        env = {"GIT_INDEX_FILE": str(index)}
        repo.out("read-tree", tree, env=env)
        repo.out("update-index", "-z", "--index-info", env=env, input_bytes=lines)
        return repo.text("write-tree", env=env)


def hide_records(folder: Path) -> bool:
    """Write ``IGNORE_FILE`` in ``folder``'s ``.autopilot/`` (a ``--worktree`` run's
    work folder), so ``git add -A`` there never commits autopilot's records; a file
    already there (the project's own, say) is left as it is.

    Returns:
        True if it was written now.

    Raises:
        OSError: the folder or the file cannot be written.
    """
    place = folder / PROJECT_DIR
    place.mkdir(exist_ok=True)
    try:
        with (place / IGNORE_FILE).open("x", encoding="utf-8") as handle:
            handle.write(IGNORE_TEXT)
    except FileExistsError:
        return False
    return True


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
