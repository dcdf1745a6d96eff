"""``.autopilot/approved-run.json``, the approved run boundary, on disk.

The format and the rules of when it is in force are ``core.boundary``'s. The file is
read as a bounded regular file (never through a symlink: a repository can plant a
FIFO or a link to ``/dev/zero`` there) and written atomically (temp file, fsync,
rename), so a reader never sees half of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autopilot.core.boundary import Boundary, parse_boundary
from autopilot.store.atomic import write_json_atomically
from autopilot.store.files import UnsafeFileError, read_bounded_file

APPROVED_RUN_FILE = Path(".autopilot") / "approved-run.json"
"""Where a project's approved run boundary lives, relative to the work tree."""

MAX_APPROVED_RUN_BYTES = 256 * 1024


@dataclass(frozen=True)
class ApprovedRunFile:
    """What ``approved-run.json`` holds now.

    Attributes:
        exists: The file is there.
        boundary: The boundary, when it is in force.
        problems: Why it is not in force (one line each), or why it cannot be read.
        data: The parsed JSON object (None: absent, unreadable or not JSON).
    """

    exists: bool
    boundary: Boundary | None = None
    problems: tuple[str, ...] = ()
    data: Any = None


def read_approved_run(path: Path) -> ApprovedRunFile:
    """Read and check ``path``; never raises (what is wrong is in ``problems``)."""
    try:
        raw = read_bounded_file(path, max_bytes=MAX_APPROVED_RUN_BYTES, follow_symlinks=False)
    except FileNotFoundError:
        return ApprovedRunFile(exists=False)
    except UnsafeFileError as error:
        return ApprovedRunFile(exists=True, problems=(f"{path} {error.strerror}",))
    except OSError as error:
        return ApprovedRunFile(exists=True, problems=(f"cannot read {path}: {error.strerror}",))
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        return ApprovedRunFile(exists=True, problems=(f"{path} is not JSON ({error})",))
    boundary, problems = parse_boundary(data)
    return ApprovedRunFile(True, boundary, tuple(problems), data)


def write_approved_run(path: Path, data: Any, *, mode: int = 0o644) -> None:
    """Write ``data`` as ``path``'s JSON, atomically (``mode``: 0600 in a run folder).

    Raises:
        OSError: the folder cannot be made or the file written (the old file is then
            untouched).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomically(path, data, mode=mode)
