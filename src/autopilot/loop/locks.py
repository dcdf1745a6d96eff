"""The driver's locks: one driver per run, one active run per work tree.

Both are ``fcntl`` locks (``filelock.UnixFileLock``), released by the OS when the
driver dies, so a crash never leaves a run or a project locked (field report 17).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import filelock

from autopilot.errors import RunLockedError


class RunLocks:
    """Holds ``<run>/driver.lock`` and ``<runs-root>/.locks/<project>.lock``.

    Args:
        root: The runs root.
        run_id: The run being driven (written beside the project lock as its owner).
        folder: The run's folder.
        cwd: The work tree the run drives.
    """

    def __init__(self, root: Path, run_id: str, folder: Path, cwd: Path) -> None:
        self.run_id = run_id
        self.cwd = cwd
        key = hashlib.sha256(str(cwd).encode()).hexdigest()[:16]
        self._locks_dir = root / ".locks"
        self._owner = self._locks_dir / f"{key}.owner"
        self._run_lock = filelock.UnixFileLock(str(folder / "driver.lock"), timeout=0)
        self._project_lock = filelock.UnixFileLock(str(self._locks_dir / f"{key}.lock"), timeout=0)
        self._held: list[filelock.BaseFileLock] = []

    def acquire(self) -> None:
        """Take both locks at once or neither.

        Raises:
            RunLockedError: another driver holds the run, or another run the project.
        """
        self._locks_dir.mkdir(mode=0o700, exist_ok=True)
        try:
            self._run_lock.acquire()
        except filelock.Timeout:
            raise RunLockedError(f"run {self.run_id} is already being driven") from None
        self._held.append(self._run_lock)
        try:
            self._project_lock.acquire()
        except filelock.Timeout:
            owner = self._owner.read_text(errors="replace").strip() if self._owner.exists() else ""
            self.release()
            raise RunLockedError(
                f"another run ({owner or 'unknown'}) is active in {self.cwd}; "
                "stop it first (autopilot stop)"
            ) from None
        self._held.append(self._project_lock)
        self._owner.write_text(self.run_id + "\n")

    def release(self) -> None:
        """Release whatever is held."""
        for lock in reversed(self._held):
            lock.release()
        self._held.clear()
