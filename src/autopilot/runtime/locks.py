"""The driver's locks: one driver per run, one active run per work tree, one owner
per backlog; the launch lock: one detached launch at a time into a work tree; and the
merge lock: one ``autopilot merge`` at a time into a checkout.

All are ``fcntl`` locks (``store.flock``), released by the OS when the
driver dies, so a crash never leaves a run or a project locked.
``run`` takes the project lock before it creates a run, so a refused second run
leaves nothing behind.

A backlog run (``mode`` ``backlog``) also owns its backlog, the ``.autopilot/tasks.jsonl``
of its project home (``workspace.worktrees.project_home``: the user's checkout for a
``--worktree`` run, whose own work tree is new): two runs working one backlog would
take the same item and undo each other's results. A hook run armed with ``--backlog``
owns it while it is armed (it has no process to hold a lock: ``autopilot arm`` takes
the lock while it arms, and later runs find the armed run in the hook registry).
The lanes of one run are one owner.

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
from autopilot.errors import CheckoutBusyError, ProjectBusyError, RunLockedError, StateFileError
from autopilot.runtime.liveness import driver_alive
from autopilot.store.flock import FileLock
from autopilot.store.paths import list_run_ids
from autopilot.store.private import make_private_dir, write_private
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state_quietly
from autopilot.store.state_file import read_state_json
from autopilot.workspace.work_tree import work_tree_root
from autopilot.workspace.worktrees import RunWorktree, project_home

LOCKS_DIR = ".locks"
"""``<runs-root>/.locks/``: the work trees' lock files."""


def _key(work_tree: Path) -> str:
    return sha256_hex(str(work_tree).encode())[:16]


BACKLOG_MODE = "backlog"
"""The ``mode`` of a ``run --backlog`` run (``cli.run_sources``)."""


def _says_ended(path: Path) -> bool:
    """Does a run's ``state.json``, as plain JSON, say it ended? The typed read then
    finds it ended too (``terminated`` is read as the same truth value) or refuses the
    file: either way it is no rival, told without decoding the whole state."""
    try:
        return bool(read_state_json(path).get("terminated"))
    except StateFileError:
        return False


def worked_backlog(state: RunState) -> tuple[Path, str] | None:
    """The project home whose backlog a driver run works and the run that owns it
    there (a lane's parallel run; else the run itself), or None (not a backlog run)."""
    if state.mode != BACKLOG_MODE or state.cwd is None:
        return None
    from autopilot.store.lanes import LaneOf  # a backlog run's: only such a run loads it

    home = project_home(Path(state.cwd), RunWorktree.from_json(state.extra.get("worktree")))
    lane = LaneOf.from_json(state.extra.get("lane"))
    return home, (lane.parent if lane is not None else state.run_id)


def backlog_home(state: RunState) -> Path | None:
    """The backlog a driver of this run claims, or None: not a backlog run, or a lane
    of a parallel run (its lanes are one owner, claimed when they were armed)."""
    worked = worked_backlog(state)
    if worked is None or worked[1] != state.run_id:
        return None
    return worked[0]


def _armed_backlog_homes(root: Path) -> dict[str, Path]:
    """Hook runs armed with ``--backlog``: run id -> the project whose backlog they work."""
    from autopilot.store.hook_registry import load_armings

    armings, _ = load_armings(root)
    return {a.run_id: Path(a.project) for a in armings if a.backlog}


class ProjectLock:
    """``<runs-root>/.locks/<project>.lock``: one active run per work tree, and with
    ``backlog``, ``<runs-root>/.locks/<home>.backlog.lock``: one owner per backlog.

    Args:
        root: The runs root.
        cwd: The work tree.
        backlog: The project home whose ``.autopilot/tasks.jsonl`` the run works
            (``backlog_home``), or None.
        work_tree: False to claim the backlog alone (``autopilot arm --backlog``: a
            hook run does not own the work tree).
    """

    def __init__(
        self, root: Path, cwd: Path, *, backlog: Path | None = None, work_tree: bool = True
    ) -> None:
        self.root = root
        self.cwd = cwd
        self.work_tree = work_tree_root(cwd)
        self.backlog = backlog.resolve() if backlog is not None else None
        self._dir = root / LOCKS_DIR
        # ``run`` takes them in the main thread and the driver, behind the live view,
        # releases them in another: a FileLock is not tied to a thread.
        self._claims: list[tuple[FileLock, Path]] = []
        self._claims_tree = work_tree
        if work_tree:
            key = _key(self.work_tree)
            self._claims.append((FileLock(self._dir / f"{key}.lock"), self._dir / f"{key}.owner"))
        if self.backlog is not None:
            key = _key(self.backlog)
            self._claims.append(
                (FileLock(self._dir / f"{key}.backlog.lock"), self._dir / f"{key}.backlog.owner")
            )

    @classmethod
    def of_run(cls, root: Path, state: RunState) -> ProjectLock:
        """The lock a driver of the run in ``state`` takes (its backlog too, if any)."""
        return cls(root, Path(state.cwd or "."), backlog=backlog_home(state))

    @property
    def held(self) -> bool:
        """Whether this process holds it."""
        return all(lock.held for lock, _ in self._claims)

    def acquire(self, *, run_id: str | None = None) -> None:
        """Take the lock: all of it, or none.

        Args:
            run_id: The run taking it (its own driver record is not a rival).

        Raises:
            ProjectBusyError: another run is active in this work tree, or owns the
                backlog.
        """
        make_private_dir(self._dir, exist_ok=True)
        for number, (lock, owner_file) in enumerate(self._claims):
            if not lock.acquire():
                for taken, _ in self._claims[:number]:
                    taken.release()
                owner = (
                    owner_file.read_text(errors="replace").strip() if owner_file.exists() else ""
                )
                on_backlog = number > 0 or not self._claims_tree
                raise ProjectBusyError(self._refusal(owner or "unknown", on_backlog)) from None
        rival = self._live_rival(run_id)
        if rival is not None:
            self.release()
            raise ProjectBusyError(self._refusal(*rival))

    def _refusal(self, owner: str, on_backlog: bool) -> str:
        if on_backlog:
            tasks = Path(str(self.backlog)) / ".autopilot" / "tasks.jsonl"
            return (
                f"another run ({owner}) is active on the backlog {tasks}; "
                f"stop it first (autopilot stop {owner})"
            )
        return f"another run ({owner}) is active in {self.cwd}; stop it first (autopilot stop)"

    def _live_rival(self, run_id: str | None) -> tuple[str, bool] | None:
        """A run other than ``run_id`` that is active in this work tree (its driver is
        alive) or owns this backlog (a live backlog driver, or an armed hook run), and
        whether it is the backlog's owner."""
        armed = _armed_backlog_homes(self.root) if self.backlog is not None else {}
        for other in list_run_ids(self.root):
            if other == run_id:
                continue
            path = RunDir(self.root / other).state
            if _says_ended(path):
                continue
            state = read_state_quietly(path)
            if state is None or state.terminated or state.cwd is None:
                continue
            if self.backlog is not None and other in armed:
                if armed[other].resolve() == self.backlog:
                    return other, True
                continue
            if state.pid is None or state.pid == os.getpid() or not driver_alive(state):
                continue
            worked = worked_backlog(state)
            if self.backlog is not None and worked is not None:
                home, owner = worked
                if home.resolve() == self.backlog and owner != run_id:
                    return owner, True
            if self._claims_tree and work_tree_root(Path(state.cwd)) == self.work_tree:
                return other, False
        return None

    def set_owner(self, run_id: str) -> None:
        """Name the run holding the lock, for the message a refused run gets."""
        for _, owner_file in self._claims:
            write_private(owner_file, (run_id + "\n").encode())

    def release(self) -> None:
        """Release it (no-op if not held)."""
        for lock, _ in self._claims:
            lock.release()

    def __enter__(self) -> ProjectLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class LaunchLock:
    """``<runs-root>/.locks/<project>.launch``: one launch at a time into a work tree.

    ``run``, ``start``, ``send`` and ``relaunch`` hold it from the check that no other
    run drives the work tree until the daemon they started holds the project lock (or
    has failed): the project lock alone cannot cover that window, since the command
    that checks is not the process that drives. A second launch meanwhile is refused
    at once, so of several ``autopilot start`` at once exactly one starts the run.

    Args:
        root: The runs root.
        cwd: The work tree.
    """

    def __init__(self, root: Path, cwd: Path) -> None:
        self.cwd = cwd
        self._dir = root / LOCKS_DIR
        self._lock = FileLock(self._dir / f"{_key(work_tree_root(cwd))}.launch")

    def acquire(self) -> None:
        """Take the lock at once, or refuse.

        Raises:
            ProjectBusyError: another command is starting a run in this work tree.
        """
        make_private_dir(self._dir, exist_ok=True)
        if not self._lock.acquire():
            raise ProjectBusyError(
                f"another autopilot command is starting a run in {self.cwd} right now; "
                "nothing was started (see autopilot list)"
            )

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
        self._run_lock.write_note(driver_note(os.getpid()))

    def release(self) -> None:
        """Release both."""
        self.project.release()
        self._run_lock.release()


def driver_note(pid: int) -> str:
    """What ``driver.lock`` holds while a driver holds it: its pid and identity as
    JSON (``pid``, ``pidStartTime``, ``pidCommand``), so ``stop`` can reach a driver
    whose ``state.json`` cannot be read (``liveness.lock_holder``)."""
    import json

    from autopilot.loop.identity import process_identity

    identity = process_identity(pid)
    start_time = identity.start_time if identity else None
    command = identity.command if identity else None
    return json.dumps({"pid": pid, "pidStartTime": start_time, "pidCommand": command}) + "\n"


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
