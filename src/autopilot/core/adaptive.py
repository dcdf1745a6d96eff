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

from typing import TYPE_CHECKING

from msgspec import Struct

from autopilot.core.vocabulary import DEFAULT_EXTENSION, DEFAULT_MAX_TOTAL, Action, Reason

if TYPE_CHECKING:  # types only
    from autopilot.core.attempt import Attempt
    from autopilot.core.policy import Decision, PolicyConfig

__all__ = [
    "DEFAULT_EXTENSION",
    "DEFAULT_MAX_TOTAL",
    "Extension",
    "ProgressSignals",
    "adaptive_extension",
    "extend_budget",
]


class ProgressSignals(Struct, frozen=True):
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


class Extension(Struct, frozen=True):
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


def extend_budget(
    decision: Decision,
    attempt: Attempt,
    config: PolicyConfig,
    *,
    iterations_done: int,
    previous_digest: str | None,
    digest: str | None,
) -> Extension | None:
    """The extension a ``--self-improve`` run earns when ``decision`` ends it on its
    iteration budget, else None.

    Args:
        decision: What the policy decided after ``attempt``.
        attempt: The attempt (its commits, and the work tree's uncommitted changes).
        config: The run's policy (``adaptive_extension`` 0: never extended).
        iterations_done: Iterations spent, this one included.
        previous_digest: The previous response's digest (None: unknown).
        digest: This response's digest.
    """
    if (
        config.adaptive_extension <= 0
        or config.max_iterations is None
        or decision.action is not Action.ABORT
        or decision.reason != Reason.MAX_ITERATIONS
    ):
        return None
    signals = ProgressSignals(
        uncommitted_changes=bool(attempt.uncommitted_changes),
        recent_commits=bool(attempt.commits),
        tail_distinct=digest is not None and previous_digest not in (None, digest),
    )
    return adaptive_extension(
        max_iterations=config.max_iterations,
        iterations_done=iterations_done,
        signals=signals,
        extension=config.adaptive_extension,
        max_total=config.adaptive_max_total,
    )
