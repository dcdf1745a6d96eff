"""Adaptive extension of the iteration budget (``--self-improve`` only; pure).

When a ``--self-improve`` run reaches ``--max-iterations`` while work is visibly in
flight, it is granted ``adaptive_extension`` more iterations, up to
``adaptive_max_total`` in all, instead of stopping useful work. Progress signals:
uncommitted changes in the work tree, commits in the last few iterations, and a tail
of responses that is not byte-identical. Any positive signal extends; when every
signal is negative (a clean tree, no commits, the same answer again) the ceiling the
user gave holds. ``--grow-project`` and prompt runs never extend.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_EXTENSION = 5
DEFAULT_MAX_TOTAL = 50


@dataclass(frozen=True)
class ProgressSignals:
    """What the last iterations show.

    Attributes:
        uncommitted_changes: The work tree has changes (``git status --porcelain``).
        recent_commits: Commits were made in the last few iterations.
        tail_distinct: The last few responses are not all byte-identical.
    """

    uncommitted_changes: bool
    recent_commits: bool
    tail_distinct: bool

    def positive(self) -> list[str]:
        """The signals that say work is in flight, in words."""
        found = []
        if self.uncommitted_changes:
            found.append("uncommitted changes")
        if self.recent_commits:
            found.append("recent commits")
        if self.tail_distinct:
            found.append("the answers still differ")
        return found


@dataclass(frozen=True)
class Extension:
    """A granted extension: the new ceiling and why."""

    max_iterations: int
    reason: str


def adaptive_extension(
    *,
    max_iterations: int,
    iterations_done: int,
    signals: ProgressSignals,
    extension: int = DEFAULT_EXTENSION,
    max_total: int = DEFAULT_MAX_TOTAL,
) -> Extension | None:
    """The new ceiling when the budget is reached with work in flight, else None.

    Args:
        max_iterations: The current ceiling (0 = unlimited: never extended).
        iterations_done: Iterations spent so far.
        signals: The progress signals.
        extension: Iterations granted at a time.
        max_total: The ceiling never goes above this.
    """
    if max_iterations <= 0 or iterations_done < max_iterations or extension <= 0:
        return None
    positive = signals.positive()
    if not positive:
        return None
    ceiling = min(max_iterations + extension, max_total)
    if ceiling <= max_iterations:
        return None
    return Extension(
        ceiling,
        f"extended to {ceiling} iterations (at most {max_total}): {', '.join(positive)}",
    )
