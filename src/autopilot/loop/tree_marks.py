"""The marks of the work tree that bound each iteration (``docs/architecture.md``,
"One mark between two iterations").

An iteration's change is what differs between its start mark and its end mark
(``workspace.marks``). Each mark is a ``git status`` of the whole work tree, so the
start mark of an iteration reuses the end mark of the one before when nothing but the
agent could have changed the tree in between: the driver did not wait (a pause, a
usage-limit wait, a backoff, a gate: any hold of ``loop.waits``), wrote nothing into
the tree itself (the memory file or ``.autopilot/.gitignore`` put back, the run's
branch made again, a verify command run), the run is a plain one (a backlog run
writes its tasks between iterations; a lane shares its run's budget with others), and
the end mark is at most ``REUSE_WINDOW_S`` old. A new driver (a relaunch too) takes an
opening mark before its baseline checkpoint, and its first iteration starts from that
mark on the same terms (creating the memory file is a write into the tree). An edit
made by a person in the milliseconds between two iterations counts toward the next
iteration's change.
"""

from __future__ import annotations

from collections.abc import Callable

from autopilot.loop.clock import Clock
from autopilot.workspace.marks import TreeMark, Workspace

REUSE_WINDOW_S = 1.0
"""How old (seconds, monotonic) an end mark may be and still open the next iteration."""


class IterationMarks:
    """Takes the start and end marks of a driver's iterations.

    Args:
        workspace: Takes the marks.
        clock: Times the gap between an end mark and the next start.
        quiet: A value that changes whenever the driver waits or writes into the
            work tree itself (compared between the end mark and the next start).
        reuse: Whether an end mark may open the next iteration at all (False for a
            backlog run and a lane).
    """

    def __init__(
        self,
        workspace: Workspace,
        clock: Clock,
        quiet: Callable[[], object],
        *,
        reuse: bool,
    ) -> None:
        self._workspace = workspace
        self._clock = clock
        self._quiet = quiet
        self._reuse = reuse
        self._end: tuple[TreeMark, float, object] | None = None

    def start(self) -> TreeMark:
        """The mark an iteration starts from: the last end mark if it may serve
        (see the module), else a fresh one."""
        end, self._end = self._end, None
        if end is not None:
            mark, taken, quiet = end
            if self._clock.monotonic() - taken <= REUSE_WINDOW_S and self._quiet() == quiet:
                return mark
        return self._workspace.mark()

    def opening(self) -> TreeMark | None:
        """The mark a new driver takes before the run's baseline checkpoint, which
        then knows HEAD and the tree's key without asking git (``workspace.marks``);
        kept to start the first iteration, as an end mark is. None where end marks
        are not reused (a backlog run, a lane): the baseline asks git itself."""
        return self.end() if self._reuse else None

    def end(self) -> TreeMark:
        """A fresh mark that ends an iteration (kept to open the next, if it may)."""
        mark = self._workspace.mark()
        if self._reuse and mark.entries is not None:
            self._end = (mark, self._clock.monotonic(), self._quiet())
        return mark

    def forget(self) -> None:
        """The driver changed the work tree itself since the end mark: the next
        iteration starts from a fresh mark."""
        self._end = None
