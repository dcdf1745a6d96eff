"""How HEAD moved during an iteration, beyond new commits on the same branch.

An agent may reset, rebase, amend, switch branches or detach HEAD. None of that is an
error: the move is recorded (a ``head_moved`` event) and the run goes on. Commits made
on the new branch are still observed (``commit_observed``) because commits are read
between the two HEADs, whatever branch they are on.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from msgspec import Struct

from autopilot.workspace.repo import Repository


class HeadMoveKind(StrEnum):
    """What happened to HEAD."""

    SWITCHED = "switched"
    """Another branch (or a detached HEAD) is checked out."""
    REWOUND = "rewound"
    """The same branch points to an older commit (``reset --hard HEAD~1``)."""
    REWRITTEN = "rewritten"
    """The same branch points to a commit that does not contain the old one (rebase,
    amend, a reset elsewhere)."""


class HeadMove(Struct, frozen=True):
    """A move of HEAD that is not just new commits on the same branch.

    Attributes:
        kind: See ``HeadMoveKind``.
        from_head: HEAD before (None before a first commit).
        to_head: HEAD after.
        from_branch: The branch before (None: detached).
        to_branch: The branch after (None: detached).
        dropped: Commits of the old HEAD no longer reachable from the new one.
    """

    kind: HeadMoveKind
    from_head: str | None
    to_head: str | None
    from_branch: str | None
    to_branch: str | None
    dropped: int

    def event_fields(self) -> dict[str, Any]:
        """The fields of its ``head_moved`` event (``docs/formats.md``)."""
        return {
            "kind": self.kind.value,
            "from": self.from_head,
            "to": self.to_head,
            "fromBranch": self.from_branch,
            "toBranch": self.to_branch,
            "dropped": self.dropped,
        }


def head_move(
    repo: Repository,
    before: tuple[str | None, str | None],
    after: tuple[str | None, str | None],
) -> HeadMove | None:
    """How HEAD moved from ``before`` to ``after`` (each ``(sha, branch)``), or None
    when it stayed or only gained commits on the same branch.

    Never raises for git's answers: an unknown commit counts as not an ancestor.
    """
    (old, old_branch), (new, new_branch) = before, after
    if old == new and old_branch == new_branch:
        return None
    if old_branch != new_branch:
        kind = HeadMoveKind.SWITCHED
    elif old is None or new is None or _is_ancestor(repo, old, new):
        return None
    elif _is_ancestor(repo, new, old):
        kind = HeadMoveKind.REWOUND
    else:
        kind = HeadMoveKind.REWRITTEN
    return HeadMove(kind, old, new, old_branch, new_branch, _dropped(repo, old, new))


def _is_ancestor(repo: Repository, older: str, newer: str) -> bool:
    return repo.run("merge-base", "--is-ancestor", older, newer).returncode == 0


def _dropped(repo: Repository, old: str | None, new: str | None) -> int:
    if old is None:
        return 0
    span = old if new is None else f"{new}..{old}"
    done = repo.run("rev-list", "--count", span)
    text = done.stdout.decode("ascii", "replace").strip()
    return int(text) if done.returncode == 0 and text.isdigit() else 0
