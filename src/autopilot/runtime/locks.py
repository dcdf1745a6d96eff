"""The driver's locks: one driver per run, one active run per work tree; and the
merge lock: one ``autopilot merge`` at a time into a checkout.

Both are ``fcntl`` locks (``store.flock``), released by the OS when the
driver dies, so a crash never leaves a run or a project locked.
``run`` takes the project lock before it creates a run, so a refused second run
leaves nothing behind.

A lock file can be deleted (by an agent, by a clean-up script): a process then
creates a new file and locks it although the first holder still runs. So a lock is
never the only witness: each acquisition also asks the recorded drivers themselves
(``liveness.driver_alive``: pid **and** process identity). A live driver of the
same run, or of another run in the same work tree, refuses the lock.
"""

from __future__ import annotations

import os
from pathlib import Path

from autopilot.core.digest import sha256_hex
from autopilot.errors import CheckoutBusyError, ProjectBusyError, RunLockedError
from autopilot.runtime.liveness import driver_alive
from autopilot.store.flock import FileLock
from autopilot.store.paths import list_run_ids
from autopilot.store.private import make_private_dir, write_private
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state_quietly
from autopilot.workspace.git import work_tree_root

LOCKS_DIR = ".locks"
"""``<runs-root>/.locks/``: the work trees' lock files."""


def _key(work_tree: Path) -> str:
    return sha256_hex(str(work_tree).encode())[:16]


class ProjectLock:
    """``<runs-root>/.locks/<project>.lock``: one active run per work tree.

    Args:
        root: The runs root.
        cwd: The work tree.
    """

    def __init__(self, root: Path, cwd: Path) -> None:
        self.root = root
        self.cwd = cwd
        self.work_tree = work_tree_root(cwd)
        key = _key(self.work_tree)
        self._dir = root / LOCKS_DIR
        self._owner = self._dir / f"{key}.owner"
        # ``run`` takes it in the main thread and the driver, behind the live view,
        # releases it in another: a FileLock is not tied to a thread.
        self._lock = FileLock(self._dir / f"{key}.lock")

    @property
    def held(self) -> bool:
        """Whether this process holds it."""
        return self._lock.held

    def acquire(self, *, run_id: str | None = None) -> None:
        """Take the lock.

        Args:
            run_id: The run taking it (its own driver record is not a rival).

        Raises:
            ProjectBusyError: another run is active in this work tree.
        """
        make_private_dir(self._dir, exist_ok=True)
        if not self._lock.acquire():
            owner = self._owner.read_text(errors="replace").strip() if self._owner.exists() else ""
            raise ProjectBusyError(self._refusal(owner or "unknown")) from None
        rival = self._live_rival(run_id)
        if rival is not None:
            self.release()
            raise ProjectBusyError(self._refusal(rival))

    def _refusal(self, owner: str) -> str:
        return f"another run ({owner}) is active in {self.cwd}; stop it first (autopilot stop)"

    def _live_rival(self, run_id: str | None) -> str | None:
        """A run of this work tree, other than ``run_id``, whose driver is alive."""
        for other in list_run_ids(self.root):
            if other == run_id:
                continue
            state = read_state_quietly(RunDir(self.root / other).state)
            if state is None or state.terminated or state.cwd is None or state.pid is None:
                continue
            if state.pid == os.getpid() or not driver_alive(state):
                continue
            if work_tree_root(Path(state.cwd)) == self.work_tree:
                return other
        return None

    def set_owner(self, run_id: str) -> None:
        """Name the run holding the lock, for the message a refused run gets."""
        write_private(self._owner, (run_id + "\n").encode())

    def release(self) -> None:
        """Release it (no-op if not held)."""
        self._lock.release()


class RunLocks:
    """The run's ``driver.lock`` plus its work tree's ``ProjectLock``.

    Args:
        project: The project lock; if it is already held (``run`` took it before
            arming), it is kept, not taken again.
        run_id: The run being driven.
        folder: The run's folder.
    """

    def __init__(self, project: ProjectLock, run_id: str, folder: RunDir) -> None:
        self.project = project
        self.run_id = run_id
        self.folder = folder
        self._run_lock = FileLock(folder.driver_lock)

    def acquire(self) -> None:
        """Take both locks, or neither.

        Raises:
            RunLockedError: another driver holds the run, or another run the project.
        """
        if not self._run_lock.acquire():
            raise RunLockedError(f"run {self.run_id} is already being driven")
        state = read_state_quietly(self.folder.state)
        if state is not None and state.pid != os.getpid() and driver_alive(state) is True:
            # Its driver.lock was deleted, but its driver lives on.
            self._run_lock.release()
            raise RunLockedError(f"run {self.run_id} is already being driven (pid {state.pid})")
        if not self.project.held:
            try:
                self.project.acquire(run_id=self.run_id)
            except RunLockedError:
                self._run_lock.release()
                raise
        self.project.set_owner(self.run_id)

    def release(self) -> None:
        """Release both."""
        self.project.release()
        self._run_lock.release()


class MergeLock:
    """``<runs-root>/.locks/merge-<checkout>.lock``: one ``autopilot merge`` at a time
    into a checkout. Two merges computed from the same HEAD would otherwise both write
    its files and the second could not move the branch: a half-merged checkout.

    Args:
        root: The runs root.
        checkout: The top of the checkout merged into.
    """

    def __init__(self, root: Path, checkout: Path) -> None:
        self.checkout = checkout
        key = _key(checkout)
        self._dir = root / LOCKS_DIR
        self._owner = self._dir / f"merge-{key}.owner"
        self._lock = FileLock(self._dir / f"merge-{key}.lock")

    def acquire(self, run_id: str) -> None:
        """Take the lock at once, or refuse.

        Args:
            run_id: The run being merged (named to a merge refused meanwhile).

        Raises:
            CheckoutBusyError: another merge into this checkout holds it.
        """
        make_private_dir(self._dir, exist_ok=True)
        if not self._lock.acquire():
            owner = self._owner.read_text(errors="replace").strip() if self._owner.exists() else ""
            raise CheckoutBusyError(
                f"another autopilot merge ({owner or 'of another run'}) is under way into "
                f"{self.checkout}; nothing was changed; merge again once it is done"
            )
        write_private(self._owner, f"run {run_id}, pid {os.getpid()}\n".encode())

    def release(self) -> None:
        """Release it (no-op if not held)."""
        self._lock.release()
