"""A backlog run's approved run boundary (``.autopilot/approved-run.json``) at work.

Without the file a backlog run is not fenced: every path is allowed and only the
run's own budgets count. With it (``autopilot run --backlog --approve``, or written by
hand in the shape ``core.boundary`` reads):

- ``check`` (at each boundary, before the next item): a person's edits are taken in.
  Its stop signals end the run: ``approved`` false or ``status`` other than
  ``running`` (``user_stopped``), ``budget.remaining_steps`` 0 (the approved steps
  are spent: ``max_iterations``), the file removed after the run used it
  (``user_stopped``). A file that cannot be read or is incomplete holds the run
  (paused with the reason) until it is fixed; nothing is rewritten.
- ``take`` (before an item starts): one step is spent and written back, read anew
  under the file's lock, so the lanes of a parallel run, which share the file, never
  lose a step or spend one past 0; ``give_back`` returns it when no item started.
- ``end`` (after the agent): what the agent changed in the file is put back (a
  ``warning`` says so): the boundary is the person's, not the agent's.

The allowed surfaces fence each item that names none of its own; files changed
outside them reopen the item (``loop.backlog``). The copy autopilot last wrote is kept
in the run folder (``approved-run.json``; a lane's in its parallel run's folder, one
copy for every lane), so a relaunch knows the run had one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autopilot.core.boundary import Boundary, new_boundary
from autopilot.core.vocabulary import Reason
from autopilot.errors import EnvironmentProblem, StateFileError, UsageError
from autopilot.store.approved_run import (
    APPROVED_RUN_FILE,
    read_approved_run,
    write_approved_run,
)
from autopilot.store.flock import holding

LOCK_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Fence:
    """What the boundary file says before the next item.

    Attributes:
        surfaces: The allowed surfaces (empty: every path).
        stop: ``(reason, note)`` when the approved run is over.
        hold: Why the run must wait for a person to fix the file.
    """

    surfaces: tuple[str, ...] = ()
    stop: tuple[str, str] | None = None
    hold: str | None = None


def _stop_of(data: Any) -> tuple[str, str] | None:
    """The stop signals in a file that is not in force, else None."""
    if not isinstance(data, dict):
        return None
    if data.get("approved") is not True:
        return Reason.USER_STOPPED, "approved-run.json: approved is no longer true"
    if data.get("status") != "running":
        return Reason.USER_STOPPED, f"approved-run.json: status is {data.get('status')!r}"
    budget = data.get("budget")
    steps = budget.get("remaining_steps") if isinstance(budget, dict) else None
    if isinstance(steps, int) and not isinstance(steps, bool) and steps <= 0:
        return (
            Reason.MAX_ITERATIONS,
            "approved-run.json: the approved steps are spent (budget.remaining_steps 0)",
        )
    return None


class ApprovedRun:
    """One backlog run's view of the project's approved run boundary.

    Args:
        cwd: The work tree.
        run_copy: Where the copy autopilot last wrote is kept (in the run folder).
        warn: Appends a ``warning`` event with this note.
        lock: The lock file every run sharing the file takes to change it (outside
            the work tree); None: no lock (one run alone).
    """

    def __init__(
        self,
        cwd: Path,
        run_copy: Path,
        warn: Callable[[str], None],
        lock: Path | None = None,
    ) -> None:
        self.path = cwd / APPROVED_RUN_FILE
        self.run_copy = run_copy
        self.warn = warn
        self.lock = lock
        self._boundary: Boundary | None = None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        if self.lock is None:
            yield
            return
        self.lock.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with holding(self.lock, timeout_seconds=LOCK_TIMEOUT_SECONDS, what=self.path):
            yield

    def check(self) -> Fence:
        """Before the next item: the surfaces, or why the run stops or holds."""
        found = read_approved_run(self.path)
        self._boundary = found.boundary
        if not found.exists:
            if self.run_copy.exists():
                return Fence(stop=(Reason.USER_STOPPED, "approved-run.json was removed"))
            return Fence()
        if found.boundary is not None:
            return Fence(surfaces=found.boundary.allowed_surfaces)
        stop = _stop_of(found.data)
        if stop is not None:
            return Fence(stop=stop)
        return Fence(hold=f"fix .autopilot/approved-run.json first: {'; '.join(found.problems)}")

    def take(self) -> Fence:
        """An item may start: spend one of the approved steps, the file read anew under
        its lock (another lane may have spent one since ``check``), and write it back.

        Returns:
            ``Fence()`` when a step was taken (or no boundary is in force since
            ``check``); else why the run stops or holds, nothing spent.

        Raises:
            OSError: the file cannot be written.
            StateFileError: the lock stayed taken.
        """
        if self._boundary is None:
            return Fence()
        with self._locked():
            found = read_approved_run(self.path)
            if found.boundary is None:
                self._boundary = None
                stop = _stop_of(found.data) if found.exists else None
                if stop is not None:
                    return Fence(stop=stop)
                if not found.exists:
                    return Fence(stop=(Reason.USER_STOPPED, "approved-run.json was removed"))
                why = "; ".join(found.problems)
                return Fence(hold=f"fix .autopilot/approved-run.json first: {why}")
            spent = found.boundary.spend_step()
            self._write(spent.to_json())
            self._boundary = spent
        return Fence(surfaces=spent.allowed_surfaces)

    def give_back(self) -> None:
        """No item started after ``take``: its step goes back to the file (read anew
        under the lock). A file that is no longer autopilot's shape is left alone.

        Raises:
            OSError: the file cannot be written.
            StateFileError: the lock stayed taken.
        """
        if self._boundary is None:
            return
        with self._locked():
            data = read_approved_run(self.path).data
            budget = data.get("budget") if isinstance(data, dict) else None
            steps = budget.get("remaining_steps") if isinstance(budget, dict) else None
            if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
                return
            assert isinstance(data, dict) and isinstance(budget, dict)
            self._write({**data, "budget": {**budget, "remaining_steps": steps + 1}})
        self._boundary = None

    def _write(self, data: Any) -> None:
        write_approved_run(self.path, data)
        write_approved_run(self.run_copy, data, mode=0o600)

    def end(self) -> None:
        """After the agent: put back the file if the agent changed it."""
        if not self.run_copy.exists():
            return
        try:
            with self._locked():
                ours = read_approved_run(self.run_copy)
                theirs = read_approved_run(self.path)
                if ours.data is None or theirs.data == ours.data:
                    return
                write_approved_run(self.path, ours.data)
        except (OSError, StateFileError) as error:
            self.warn(f"approved-run.json was changed while the agent worked: {error}")
            return
        self.warn(
            "approved-run.json was changed while the agent worked; put back "
            "(pause the run to change it yourself)"
        )


def prepare_boundary(
    cwd: Path,
    *,
    approve: bool,
    steps: int,
    surfaces: Sequence[str],
    item_surfaces: Sequence[str],
) -> Boundary | None:
    """Before a backlog run starts: write the boundary a person approves now
    (``approve``), else check the one in the project; returns the one in force.

    Args:
        cwd: The work tree.
        approve: Write a new ``approved-run.json`` (``run --backlog --approve``).
        steps: Its steps (the run's iteration budget).
        surfaces: Its allowed surfaces (``--surface``); empty: ``item_surfaces``.
        item_surfaces: Every path the work items allow, in order.

    Raises:
        UsageError: the file there is not in force (and no new one is approved), or
            the new one would have no steps or no surfaces.
        EnvironmentProblem: it cannot be written.
    """
    path = cwd / APPROVED_RUN_FILE
    if not approve:
        found = read_approved_run(path)
        if found.exists and found.boundary is None:
            raise UsageError(
                f"{APPROVED_RUN_FILE} is not in force ({'; '.join(found.problems)}): fix or "
                "remove it, or approve the run anew with --approve"
            )
        return found.boundary
    if steps <= 0:
        raise UsageError("--approve needs an iteration budget: --max-iterations N (N > 0)")
    allowed = tuple(dict.fromkeys(surfaces or item_surfaces))
    if not allowed:
        raise UsageError(
            "--approve needs the paths the run may change: --surface PATTERN (e.g. "
            "--surface 'src/...'), or allowed_surface in the work items"
        )
    boundary = new_boundary(
        run_id="autopilot",
        scope="the work items of .autopilot/tasks.jsonl",
        steps=steps,
        surfaces=allowed,
        source="autopilot run --backlog --approve",
    )
    try:
        write_approved_run(path, boundary.to_json())
    except OSError as error:
        raise EnvironmentProblem(f"cannot write {path}: {error.strerror or error}") from None
    return boundary
