"""The run's memory file, ``.autopilot/memory.md`` (``docs/architecture.md``,
"The project's ``.autopilot/`` folder").

A new session has the work tree and this file, and does not need the conversation
that produced them; that is what lets a run survive a restart in the way that matters.
It is created empty (with a short header) when a run starts, every prompt says where
it is and what belongs in it, and a copy is kept in the run folder after each
iteration, so a memory file the agent deleted is put back (the driver logs
``memory_restored``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from autopilot.store.atomic import write_atomically
from autopilot.store.project_files import memory_path, project_dir

RUN_COPY_NAME = "memory.md"
MAX_MEMORY_BYTES = 1024 * 1024
"""A memory file larger than this is not copied (the copy is for restoring, not an
archive of whatever an agent wrote)."""

TEMPLATE = (
    "# Memory\n\n"
    "Notes that autopilot's iterations keep for each other: decisions and why,\n"
    "constraints, dead ends, and anything a later iteration would pay to learn again.\n"
)


def ensure_memory(project: Path) -> bool:
    """Create ``.autopilot/memory.md`` with a short header if there is none.

    Returns:
        True if it was created now.

    Raises:
        OSError: the folder or file cannot be created.
    """
    path = memory_path(project)
    if os.path.lexists(path):
        return False
    project_dir(project).mkdir(exist_ok=True)
    try:
        with path.open("x", encoding="utf-8") as handle:
            handle.write(TEMPLATE)
    except FileExistsError:
        return False
    return True


def memory_paragraph(project: Path) -> str:
    """The paragraph every prompt carries about the memory file."""
    return (
        "## Memory\n\n"
        f"This project keeps a memory file at {memory_path(project)}. Read it first. "
        "Record in it what a later iteration would pay to learn again: decisions and "
        "why, constraints, dead ends. Keep it short, and correct or remove what is no "
        "longer true."
    )


def _regular_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def keep_copy(project: Path, run_folder: Path) -> bool:
    """Copy the project's memory file into the run folder (atomically), unless the
    folder already holds the same bytes (the common case: no fsync every iteration).

    Returns:
        True if the run folder now holds a copy of it; False when there is no regular
        memory file, it is over ``MAX_MEMORY_BYTES``, or it cannot be read.

    Raises:
        OSError: the copy cannot be written.
    """
    source = memory_path(project)
    target = run_folder / RUN_COPY_NAME
    pair = (str(source), str(target))
    seen = (_identity(source), _identity(target))
    if seen[0] is not None and _kept.get(pair) == seen:
        return True  # neither file changed since they were found to hold the same bytes
    looked_ns = time.time_ns()
    if not _regular_file(source):
        return False
    try:
        if source.stat().st_size > MAX_MEMORY_BYTES:
            return False
        data = source.read_bytes()
    except OSError:
        return False
    try:
        if _regular_file(target) and target.read_bytes() == data:
            if seen[0] is not None and seen[0][-1] < looked_ns - _SETTLED_NS:
                _kept[pair] = seen
            return True
    except OSError:
        pass
    write_atomically(target, data)
    return True


_SETTLED_NS = 1_000_000_000
_kept: dict[tuple[str, str], tuple[object, object]] = {}
"""For each memory file and run copy, both files' identities (``_identity``) when
they were last found to hold the same bytes: while neither changes, ``keep_copy`` reads
neither. Only a memory file whose last change is a second older than the look is
remembered, so a change made in the same tick of the file clock (same size, same
times) is never taken for none."""


def _identity(path: Path) -> tuple[int, int, int, int, int, int] | None:
    """What changes with any change to the file at ``path`` (never followed if a
    link): type, device, inode, size and times, the change time last; None if absent."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (
        info.st_mode,
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


def restore_if_missing(project: Path, run_folder: Path) -> bool:
    """Put the run folder's copy back if the project's memory file is gone.

    Returns:
        True if it was restored (the caller logs ``memory_restored``).

    Raises:
        OSError: the file cannot be written.
    """
    target = memory_path(project)
    copy = run_folder / RUN_COPY_NAME
    if os.path.lexists(target) or not _regular_file(copy):
        return False
    data = copy.read_bytes()
    project_dir(project).mkdir(exist_ok=True)
    write_atomically(target, data)
    return True


def read_memory(project: Path, run_folder: Path | None = None) -> tuple[Path, str] | None:
    """The memory file to show for a run: the project's, else the run folder's copy.

    Returns:
        Its path and text (bad UTF-8 replaced), or None when there is neither.
    """
    candidates = [memory_path(project)]
    if run_folder is not None:
        candidates.append(run_folder / RUN_COPY_NAME)
    for path in candidates:
        if not _regular_file(path):
            continue
        try:
            return path, path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return None
