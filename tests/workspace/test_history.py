"""How HEAD moved: resets, rebases, branch switches, detaching; new commits are not a move."""

from __future__ import annotations

from pathlib import Path

from autopilot.workspace.history import HeadMoveKind, head_move
from autopilot.workspace.repo import Repository, open_repository
from tests.workspace.gitstate import git, make_repo


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name + "\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", name)
    return git(repo, "rev-parse", "HEAD").strip()


def where(repo: Repository) -> tuple[str | None, str | None]:
    return repo.head(), repo.branch()


def test_head_moves(tmp_path: Path) -> None:
    path = make_repo(tmp_path / "repo")
    repo = open_repository(path)
    start = where(repo)
    commit(path, "a")
    assert head_move(repo, start, where(repo)) is None  # new commits: not a move
    commit(path, "b")
    before = where(repo)
    git(path, "reset", "-q", "--hard", "HEAD~1")
    rewound = head_move(repo, before, where(repo))
    assert rewound is not None and rewound.kind is HeadMoveKind.REWOUND
    assert rewound.dropped == 1 and rewound.from_branch == rewound.to_branch == "main"

    before = where(repo)
    git(path, "commit", "-q", "--amend", "-m", "a, amended")
    rewritten = head_move(repo, before, where(repo))
    assert rewritten is not None and rewritten.kind is HeadMoveKind.REWRITTEN

    before = where(repo)
    git(path, "checkout", "-q", "-b", "other")
    switched = head_move(repo, before, where(repo))
    assert switched is not None and switched.kind is HeadMoveKind.SWITCHED
    assert switched.event_fields() == {
        "kind": "switched",
        "from": before[0],
        "to": before[0],
        "fromBranch": "main",
        "toBranch": "other",
        "dropped": 0,
    }
    before = where(repo)
    git(path, "checkout", "-q", "--detach")
    detached = head_move(repo, before, where(repo))
    assert detached is not None and detached.to_branch is None
    assert head_move(repo, (None, "main"), (before[0], "main")) is None  # a first commit
