"""``.autopilot/tasks.jsonl`` on disk: read it whole, change it under a lock, atomically.

The file is for people and agents to read and edit (one work item per line; see
``core.workitems`` and ``docs/backlog.md``). autopilot re-reads it at every change and
at every iteration boundary, and never loses a line it cannot understand: a malformed
line (not JSON, not a work item, over ``MAX_ITEM_LINE_BYTES``, not UTF-8) is reported
with its line number and written back byte for byte.

Writes take an ``fcntl`` lock (``store.flock``; the OS releases it when its holder dies)
kept outside the work tree, in ``<runs-root>/.locks/``, so that the lock file is not a
change an agent or ``git status`` sees; then read, change, write a temp file beside
the original, fsync, rename into place.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autopilot.core.digest import sha256_hex
from autopilot.core.item_bounds import MAX_ITEM_LINE_BYTES
from autopilot.core.ready_queue import backlog_problems
from autopilot.core.workitems import ItemFormatError, WorkItem, item_from_json
from autopilot.errors import BacklogError, BacklogWriteError
from autopilot.store.atomic import write_atomically
from autopilot.store.files import UnsafeFileError, read_bounded_file
from autopilot.store.flock import FileLock

TASKS_FILE = Path(".autopilot") / "tasks.jsonl"
"""The backlog's place in a project."""

MAX_TASKS_FILE_BYTES = 8 * 1024 * 1024
"""A larger file is refused as a whole (one line error)."""

LOCK_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class MalformedLine:
    """A line that is not a work item, kept verbatim.

    Attributes:
        number: 1-based line number in the file.
        raw: The line's bytes, without its newline.
        error: Why it is not a work item.
    """

    number: int
    raw: bytes
    error: str

    def describe(self, path: Path | str = TASKS_FILE) -> str:
        """``.autopilot/tasks.jsonl line 3: <why>``."""
        return f"{path} line {self.number}: {self.error}"


@dataclass(frozen=True)
class BacklogFile:
    """The backlog as read: its items and the lines that are not items, in file order.

    Attributes:
        entries: Each non-blank line, a ``WorkItem`` or a ``MalformedLine``.
        exists: False if there was no file.
        digest: ``sha256:<hex>`` of the file's bytes (``None`` without a file).
        lines: Per entry, the line it was read from (None: new or changed), so that
            a write gives back every line it did not mean to change byte for byte.
    """

    entries: tuple[WorkItem | MalformedLine, ...] = ()
    exists: bool = True
    digest: str | None = field(default=None, compare=False)
    lines: tuple[bytes | None, ...] = field(default=(), compare=False)

    @property
    def items(self) -> list[WorkItem]:
        """The work items, in file order."""
        return [e for e in self.entries if isinstance(e, WorkItem)]

    @property
    def malformed(self) -> list[MalformedLine]:
        """The lines that are not work items."""
        return [e for e in self.entries if isinstance(e, MalformedLine)]

    def item(self, item_id: str) -> WorkItem | None:
        """The first item with this id, or None."""
        return next((i for i in self.items if i.id == item_id), None)

    def line(self, index: int) -> bytes | None:
        """The line entry ``index`` was read from, or None (new or changed)."""
        return self.lines[index] if index < len(self.lines) else None

    @property
    def duplicate_ids(self) -> list[str]:
        """Ids used by more than one item, in file order."""
        seen: set[str] = set()
        duplicates: list[str] = []
        for item in self.items:
            if item.id in seen and item.id not in duplicates:
                duplicates.append(item.id)
            seen.add(item.id)
        return duplicates

    def hold(self) -> list[str]:
        """Why the file cannot be worked as it is, one line each (empty: it can).

        A malformed line (with its number) or a duplicate id: autopilot cannot tell
        which line a change of that item would be meant for.
        """
        lines = [m.describe() for m in self.malformed]
        lines.extend(
            f"{TASKS_FILE}: work item id {item_id!r} is used twice; give each item its own id"
            for item_id in self.duplicate_ids
        )
        return lines

    def replace_item(self, item: WorkItem) -> BacklogFile:
        """A copy with the item of the same id replaced; every other line kept.

        Raises:
            BacklogError: no item has this id, or more than one has.
        """
        if item.id in self.duplicate_ids:
            raise BacklogError(
                f"work item id {item.id!r} is used twice in {TASKS_FILE}; "
                "give each item its own id first"
            )
        if self.item(item.id) is None:
            raise BacklogError(f"no work item {item.id!r} in {TASKS_FILE}")
        return self.with_items([item])

    def with_items(self, items: Sequence[WorkItem]) -> BacklogFile:
        """A copy where each of ``items`` takes the place of the first item of its id,
        or is added at the end; every other line (malformed, a later item of a
        duplicated id, an item not named) is kept as it was read."""
        by_id: dict[str, WorkItem] = {}
        for item in items:
            by_id.setdefault(item.id, item)
        placed: set[str] = set()
        entries: list[WorkItem | MalformedLine] = []
        lines: list[bytes | None] = []
        for index, entry in enumerate(self.entries):
            line = self.line(index)
            if isinstance(entry, WorkItem) and entry.id in by_id and entry.id not in placed:
                placed.add(entry.id)
                new = by_id[entry.id]
                entries.append(new)
                lines.append(line if new == entry else None)
            else:
                entries.append(entry)
                lines.append(line)
        added = [item for item in by_id.values() if item.id not in placed]
        entries.extend(added)
        lines.extend(None for _ in added)
        return BacklogFile(tuple(entries), exists=True, lines=tuple(lines))

    def without(self, item_id: str) -> BacklogFile:
        """A copy without the first item of this id; every other line kept."""
        index = next(
            (n for n, e in enumerate(self.entries) if isinstance(e, WorkItem) and e.id == item_id),
            None,
        )
        if index is None:
            return self
        keep = [n for n in range(len(self.entries)) if n != index]
        return BacklogFile(
            tuple(self.entries[n] for n in keep),
            exists=True,
            lines=tuple(self.line(n) for n in keep),
        )

    def append(self, items: Sequence[WorkItem]) -> BacklogFile:
        """A copy with ``items`` added at the end."""
        return BacklogFile(
            (*self.entries, *items),
            exists=True,
            lines=(*(self.line(i) for i in range(len(self.entries))), *(None for _ in items)),
        )

    def problems(self) -> list[str]:
        """Malformed lines, duplicate ids, unknown dependencies and cycles, one line each."""
        lines = [m.describe() for m in self.malformed]
        lines.extend(p.message for p in backlog_problems(self.items))
        return lines


def parse_backlog(data: bytes) -> BacklogFile:
    """Parse the bytes of a ``tasks.jsonl`` (pure).

    Blank lines are skipped; every other line becomes a work item or, kept verbatim,
    a ``MalformedLine`` naming its line number and what is wrong.
    """
    entries: list[WorkItem | MalformedLine] = []
    lines: list[bytes | None] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        line = raw.rstrip(b"\r")
        if not line.strip():
            continue
        entries.append(_parse_line(number, line))
        lines.append(line)
    digest = "sha256:" + sha256_hex(data)
    return BacklogFile(tuple(entries), exists=True, digest=digest, lines=tuple(lines))


def _parse_line(number: int, line: bytes) -> WorkItem | MalformedLine:
    if len(line) > MAX_ITEM_LINE_BYTES:
        return MalformedLine(
            number,
            line,
            f"longer than {MAX_ITEM_LINE_BYTES // 1024} KiB; put long instructions in a file "
            "and name it in the prompt",
        )
    try:
        value = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        return MalformedLine(number, line, "not valid UTF-8")
    except (ValueError, RecursionError) as error:
        return MalformedLine(number, line, f"not valid JSON ({error})")
    try:
        return item_from_json(value)
    except ItemFormatError as error:
        return MalformedLine(number, line, str(error))


def encode_backlog(backlog: BacklogFile) -> bytes:
    """The file's bytes: one compact JSON object per new or changed item, every other
    line as it was read."""
    lines: list[bytes] = []
    for index, entry in enumerate(backlog.entries):
        if isinstance(entry, MalformedLine):
            lines.append(entry.raw)
        else:
            lines.append(backlog.line(index) or encode_item(entry))
    return b"".join(line + b"\n" for line in lines)


def encode_item(item: WorkItem) -> bytes:
    """One item as a ``tasks.jsonl`` line (no newline).

    Raises:
        BacklogError: the line would be over ``MAX_ITEM_LINE_BYTES``.
    """
    line = json.dumps(item.to_json(), separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", errors="replace"
    )
    if len(line) > MAX_ITEM_LINE_BYTES:
        raise BacklogError(
            f"work item {item.id!r} would be over {MAX_ITEM_LINE_BYTES // 1024} KiB; "
            "put long instructions in a file and name it in the prompt"
        )
    return line


def read_bounded_regular_file(path: Path, limit_bytes: int) -> bytes | None:
    """The bytes of ``path``, or None if it does not exist.

    Only a regular file is read (not a FIFO, device or directory, and not through a
    symlink), and only up to ``limit_bytes`` (``store.files.read_bounded_file``).

    Raises:
        BacklogError: not a regular file, larger than ``limit_bytes``, or unreadable.
    """
    try:
        return read_bounded_file(path, max_bytes=limit_bytes, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except UnsafeFileError as error:
        raise BacklogError(f"{path} {error.strerror}") from None
    except OSError as error:
        raise BacklogError(f"cannot read {path}: {error.strerror or error}") from None


class Backlog:
    """A project's ``.autopilot/tasks.jsonl``.

    Args:
        project: The project directory (the work tree).
        lock_dir: Where the lock file lives (``<runs-root>/.locks``), outside the
            work tree.
    """

    def __init__(self, project: Path, lock_dir: Path) -> None:
        self.project = project
        self.path = project / TASKS_FILE
        key = sha256_hex(str(project.resolve()).encode())[:16]
        self._lock_dir = lock_dir
        self._lock = FileLock(lock_dir / f"tasks-{key}.lock", timeout_seconds=LOCK_TIMEOUT_SECONDS)

    def read(self) -> BacklogFile:
        """The file as it is now (no lock: a rename is atomic).

        Raises:
            BacklogError: not a regular file, too large, or unreadable.
        """
        data = read_bounded_regular_file(self.path, MAX_TASKS_FILE_BYTES)
        if data is None:
            return BacklogFile((), exists=False)
        return parse_backlog(data)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the backlog's lock.

        Raises:
            BacklogError: another process held it for ``LOCK_TIMEOUT_SECONDS``.
        """
        self._lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self._lock.acquire():
            raise BacklogError(f"{self.path} is locked by another process; try again") from None
        try:
            yield
        finally:
            self._lock.release()

    def update(self, change: Callable[[BacklogFile], BacklogFile]) -> BacklogFile:
        """Read, change and write the file under the lock; returns what was written.

        ``change`` sees the file as it is at that moment (never a stale copy). If
        it returns the same object, nothing is written.

        Raises:
            BacklogError: the file cannot be read, the change refused, or the write
                failed (the original file is then untouched).
        """
        with self.locked():
            current = self.read()
            changed = change(current)
            if changed is current:
                return current
            self.write_locked(changed)
            return changed

    def write_locked(self, backlog: BacklogFile) -> None:
        """Write ``backlog`` atomically; the caller holds ``locked()``.

        Raises:
            BacklogWriteError: the directory cannot be created or the write failed
                (the file is then as it was).
        """
        data = encode_backlog(backlog)
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, data, mode=0o644)
        except OSError as error:
            raise BacklogWriteError(
                f"cannot write {self.path}: {error.strerror or error}", errno=error.errno
            ) from None
