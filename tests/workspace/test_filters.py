"""A content filter the agent plants in the repository's config never runs inside
autopilot's own git calls (marks and checkpoints); the user's own filters still do."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

from autopilot.workspace.filters import overrides
from autopilot.workspace.marks import GitWorkspace
from tests.conftest import git


def _filter(path: Path, ran: Path) -> Path:
    """A clean filter that notes each run and passes the content through."""
    path.write_text(f"#!/bin/sh\necho ran >> {ran}\ncat\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _runs(ran: Path) -> int:
    return len(ran.read_text().splitlines()) if ran.exists() else 0


def test_a_filter_planted_after_the_start_never_runs_and_the_users_own_still_does(
    tmp_path: Path, repo: Path
) -> None:
    mine, planted = tmp_path / "mine-ran", tmp_path / "planted-ran"
    git(repo, "config", "filter.mine.clean", str(_filter(tmp_path / "mine.sh", mine)))
    (repo / ".gitattributes").write_text("*.txt filter=mine\n")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a filter of the user's")
    run_dir = tmp_path / "runs" / "r-1"
    run_dir.mkdir(parents=True)
    workspace = GitWorkspace(repo, run_dir)  # the driver starts watching here
    assert workspace.checkpoint(0) is not None
    before_mine = _runs(mine)
    # The agent plants a filter for every file, and one for the user's (a changed
    # definition counts as planted too), then edits files.
    git(repo, "config", "filter.evil.clean", str(_filter(tmp_path / "evil.sh", planted)))
    git(repo, "config", "filter.evil.required", "true")
    (repo / ".gitattributes").write_text("*.txt filter=mine\n*.md filter=evil\n")
    later = time.time() + 5
    for name in ("README.md", "a.txt"):
        (repo / name).write_text(f"{name} changed\n")
        os.utime(repo / name, (later, later))
    mark = workspace.mark()
    facts = workspace.checkpoint(1)
    assert mark.entries is not None and "README.md" in mark.entries
    assert facts is not None and facts.files_changed == 3  # README.md, a.txt, .gitattributes
    assert _runs(planted) == 0
    assert _runs(mine) > before_mine
    # Planted again after a mark: the config changed again, and is read again.
    git(repo, "config", "filter.evil2.process", str(tmp_path / "evil.sh"))
    git(repo, "config", "filter.evil2.clean", str(tmp_path / "evil.sh"))
    (repo / ".gitattributes").write_text("*.txt filter=mine\n*.md filter=evil\n*.py filter=evil2\n")
    (repo / "b.py").write_text("b\n")
    assert workspace.mark().entries is not None
    assert workspace.checkpoint(2) is not None
    assert _runs(planted) == 0
    assert workspace.take_warnings() == []


def test_overrides_turn_off_each_filter_not_as_trusted() -> None:
    trusted = {"filter.lfs.clean": "git-lfs clean -- %f", "filter.mine.clean": "a"}
    current = {
        "filter.lfs.clean": "git-lfs clean -- %f",
        "filter.mine.clean": "b",
        "filter.new.one.process": "x",
    }
    env = overrides(trusted, current)
    pairs = {
        env[f"GIT_CONFIG_KEY_{n}"]: env[f"GIT_CONFIG_VALUE_{n}"]
        for n in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert pairs == {
        "filter.mine.clean": "",
        "filter.mine.smudge": "",
        "filter.mine.process": "",
        "filter.mine.required": "false",
        "filter.new.one.clean": "",
        "filter.new.one.smudge": "",
        "filter.new.one.process": "",
        "filter.new.one.required": "false",
    }
    assert overrides(trusted, trusted) == {}


def test_a_relaunched_driver_trusts_the_filters_the_first_one_found(
    tmp_path: Path, repo: Path
) -> None:
    planted = tmp_path / "planted-ran"
    run_dir = tmp_path / "runs" / "r-1"
    run_dir.mkdir(parents=True)
    GitWorkspace(repo, run_dir).mark()  # the first driver
    assert json.loads((run_dir / "git-filters.json").read_text()) == {}
    assert stat.S_IMODE((run_dir / "git-filters.json").stat().st_mode) == 0o600
    # The agent plants a filter, then the driver crashes and is relaunched.
    git(repo, "config", "filter.evil.clean", str(_filter(tmp_path / "evil.sh", planted)))
    (repo / ".gitattributes").write_text("* filter=evil\n")
    later = time.time() + 5
    os.utime(repo / "README.md", (later, later))
    relaunched = GitWorkspace(repo, run_dir)
    assert relaunched.mark().entries is not None
    assert relaunched.checkpoint(1) is not None
    assert _runs(planted) == 0


def test_a_filter_planted_through_an_include_never_runs_even_once_the_includer_is_known(
    tmp_path: Path, repo: Path
) -> None:
    """The config files are read once each and again only once changed: one that
    comes to include another is read then, and the included file's filters are
    turned off in every call after, whatever that file later holds."""
    planted = tmp_path / "planted-ran"
    run_dir = tmp_path / "runs" / "r-1"
    run_dir.mkdir(parents=True)
    workspace = GitWorkspace(repo, run_dir)
    assert workspace.mark().entries is not None  # the config files read once
    extra = tmp_path / "extra.config"
    extra.write_text("")
    git(repo, "config", "include.path", str(extra))
    assert workspace.mark().entries is not None
    # The included file gains a filter: the including config is unchanged.
    evil = _filter(tmp_path / "evil.sh", planted)
    extra.write_text(f'[filter "evil"]\n\tclean = {evil}\n\trequired = true\n')
    (repo / ".gitattributes").write_text("*.md filter=evil\n")
    (repo / "README.md").write_text("changed\n")
    assert workspace.mark().entries is not None
    assert workspace.checkpoint(1) is not None
    assert _runs(planted) == 0
    assert workspace.take_warnings() == []


def test_a_filter_planted_in_place_with_the_config_s_size_and_mtime_kept_never_runs(
    tmp_path: Path, repo: Path
) -> None:
    """The agent rewrites ``.git/config`` in place at the same size (a filter over a
    comment it padded earlier) and sets its mtime back: only its ctime tells."""
    planted = tmp_path / "planted-ran"
    config = repo / ".git" / "config"
    with config.open("a") as handle:
        handle.write("# " + "x" * 120 + "\n")
    run_dir = tmp_path / "runs" / "r-1"
    run_dir.mkdir(parents=True)
    workspace = GitWorkspace(repo, run_dir)
    assert workspace.mark().entries is not None  # the config's identity seen
    before = config.stat()
    evil = _filter(tmp_path / "evil.sh", planted)
    text = config.read_text()
    padding = text[text.index("# x") :]
    planting = f'[filter "evil"]\n\tclean = {evil}\n'
    assert len(planting) < len(padding)
    with config.open("r+") as handle:
        handle.seek(len(text) - len(padding))
        handle.write(planting + "#" * (len(padding) - len(planting) - 1) + "\n")
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (config.stat().st_size, config.stat().st_mtime_ns) == (
        before.st_size,
        before.st_mtime_ns,
    )
    (repo / ".gitattributes").write_text("*.md filter=evil\n")
    (repo / "README.md").write_text("changed\n")
    assert workspace.mark().entries is not None
    assert workspace.checkpoint(1) is not None
    assert _runs(planted) == 0
