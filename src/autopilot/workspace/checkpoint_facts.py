"""What a checkpoint is, as plain facts: its kind (from its name), the checkpoint
itself, the paths changed between two, and what taking or restoring one gave
(``workspace.checkpoints`` takes and restores them)."""

from __future__ import annotations

import re
from enum import StrEnum

from msgspec import Struct

_NAME_RE = re.compile(r"^(baseline|iter-\d{4,}|before-restore-\d{4,}|restore-\d{4,})$")


class CheckpointKind(StrEnum):
    """What a checkpoint was taken for."""

    BASELINE = "baseline"
    ITERATION = "iteration"
    BEFORE_RESTORE = "before_restore"
    RESTORE = "restore"


class FileChange(Struct, frozen=True):
    """One path that differs between two checkpoints: ``A``, ``M``, ``D`` or ``T``."""

    status: str
    path: str

    def describe(self) -> str:
        """``added a.txt``, ``modified b.txt``, ``deleted c.txt``."""
        verb = {"A": "added", "D": "deleted", "M": "modified", "T": "type changed"}
        return f"{verb.get(self.status, self.status)} {self.path}"


class Checkpoint(Struct, frozen=True):
    """One checkpoint of a run.

    Attributes:
        name: Its ref's last part: ``baseline``, ``iter-0003``, ``restore-0001``, …
        sha: The checkpoint commit.
        tree: That commit's tree (the working tree's content).
        sequence: 1 for the first checkpoint of the run, then 2, 3, …
        head: The HEAD commit when it was taken (None before a first commit).
        files_changed: Paths changed since the previous checkpoint (for the
            baseline: uncommitted paths, against HEAD).
        created_at_ms: When it was taken (epoch ms, second precision).
    """

    name: str
    sha: str
    tree: str
    sequence: int
    head: str | None
    files_changed: int
    created_at_ms: int

    @property
    def kind(self) -> CheckpointKind:
        """What it was taken for, from its name."""
        if self.name == "baseline":
            return CheckpointKind.BASELINE
        if self.name.startswith("iter-"):
            return CheckpointKind.ITERATION
        if self.name.startswith("before-restore-"):
            return CheckpointKind.BEFORE_RESTORE
        return CheckpointKind.RESTORE

    @property
    def iteration(self) -> int | None:
        """The iteration it follows (0 for the baseline), None for a restore's."""
        if self.name == "baseline":
            return 0
        if self.name.startswith("iter-"):
            return int(self.name[len("iter-") :])
        return None


class Taken(Struct, frozen=True):
    """A checkpoint just taken and the paths changed since the previous one.

    Attributes:
        checkpoint: The checkpoint.
        changes: The changed paths, sorted.
        warning: git's words when some files could not be read (they are left out).
    """

    checkpoint: Checkpoint
    changes: tuple[FileChange, ...]
    warning: str | None = None


class RestoreResult(Struct, frozen=True):
    """What a restore did.

    Attributes:
        target: The checkpoint restored.
        safety: The checkpoint of the tree as it was just before (to undo).
        result: The checkpoint of the tree as the restore left it (None if nothing
            had to change).
        changes: The paths the restore wrote or deleted.
        kept: Paths left as they were although the target differs (``NOT_REWOUND``).
    """

    target: Checkpoint
    safety: Checkpoint
    result: Checkpoint | None
    changes: tuple[FileChange, ...]
    kept: tuple[str, ...]


def iteration_name(iteration: int) -> str:
    """The checkpoint name after iteration ``iteration`` (0 is the baseline)."""
    return "baseline" if iteration == 0 else f"iter-{iteration:04d}"


def checkpoint_of(
    name: str, sha: str, tree: str, created_unix: str, body: str
) -> Checkpoint | None:
    """The checkpoint a ref under the run's prefix records: its name, commit, tree,
    commit time (epoch seconds, as text) and message body with the ``Autopilot-*``
    trailers; None when ``name`` is not a checkpoint's."""
    if not _NAME_RE.fullmatch(name):
        return None
    trailers = _trailers(body)
    return Checkpoint(
        name=name,
        sha=sha,
        tree=tree,
        sequence=_int(trailers.get("Autopilot-Sequence"), 0),
        head=trailers.get("Autopilot-Head") or None,
        files_changed=_int(trailers.get("Autopilot-Files-Changed"), 0),
        created_at_ms=_int(created_unix, 0) * 1000,
    )


def _trailers(body: str) -> dict[str, str]:
    found = {}
    for line in body.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith("Autopilot-"):
            found[key] = value.strip()
    return found


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default
