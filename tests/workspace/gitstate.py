"""Real-git helpers for workspace tests: repositories, agents' edits, the user's git state."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tests.conftest import git

# Files a checkpoint, restore or worktree may write in a git directory: objects, its
# own refs, and (for a worktree) git's bookkeeping of worktrees.
_OURS = ("objects/", "refs/autopilot/", "worktrees/")


def make_repo(path: Path, *, commit: bool = True) -> Path:
    """A repository at ``path`` with a user identity and (``commit``) one commit."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "user@localhost")
    git(path, "config", "user.name", "user")
    if commit:
        (path / "README.md").write_text("project\n")
        (path / ".gitignore").write_text("*.log\nbuild/\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "start")
    return path


def user_git_state(repo: Path) -> dict[str, str]:
    """A digest of every file of ``repo``'s git directory except objects and ours:
    HEAD, branches, tags, packed-refs (ours left out), index, stash, reflogs, config,
    hooks."""
    git_dir = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    found: dict[str, str] = {}
    for folder, _, files in os.walk(git_dir):
        for name in files:
            path = Path(folder) / name
            relative = path.relative_to(git_dir).as_posix()
            if relative.startswith(_OURS):
                continue
            data = path.read_bytes()
            if relative == "packed-refs":
                data = b"\n".join(
                    line for line in data.split(b"\n") if b" refs/autopilot/" not in line
                )
            found[relative] = hashlib.sha256(data).hexdigest()
    return found


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but ``.git``, with its bytes."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = Path(folder) / name
            found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


HOOK_NAMES = (
    "pre-commit",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-merge",
    "pre-rebase",
    "post-rewrite",
    "reference-transaction",
    "post-index-change",
    "pre-merge-commit",
    "prepare-commit-msg",
)


def install_failing_hooks(repo: Path, marker: Path) -> None:
    """Every hook in ``repo`` writes ``marker`` and fails; so does an fsmonitor."""
    hooks = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-path", "hooks").strip())
    hooks.mkdir(parents=True, exist_ok=True)
    for name in HOOK_NAMES:
        script = hooks / name
        script.write_text(f"#!/bin/sh\necho {name} >> '{marker}'\nexit 1\n")
        script.chmod(0o755)
    monitor = repo.parent / "fsmonitor.sh"
    monitor.write_text(f"#!/bin/sh\necho fsmonitor >> '{marker}'\nexit 1\n")
    monitor.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(monitor))
