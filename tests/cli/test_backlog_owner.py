"""One backlog has one owner: a second run over the same ``.autopilot/tasks.jsonl`` —
a driver run in the checkout or in a worktree, or a hook run armed with ``--backlog`` —
is refused with one line naming the owner and exit 4, and leaves the backlog as the
owner keeps it (real processes throughout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_control import _events, _state, _wait_for
from tests.conftest import run_cli

ITEMS = [{"id": "a", "prompt": "first"}, {"id": "b", "prompt": "second"}]
ONCE = ["--max-iterations", "1", "--agent", "command", "--plain", "--", "/bin/true"]
SLEEPER = ["--agent", "command", "--plain", "--", "/bin/sleep", "600"]


def _backlog(repo: Path) -> Path:
    (repo / ".autopilot").mkdir(exist_ok=True)
    tasks = repo / ".autopilot" / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    return tasks


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """The runs a test starts; whatever it asserts, they are stopped at its end."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for folder in _runs(tmp_path):
        run_cli(["stop", "--now", folder.name], cwd=tmp_path)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _start_backlog_run(
    procs: list[subprocess.Popen[str]], repo: Path, *args: str
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "autopilot", "run", "--backlog", *args, *SLEEPER],
        cwd=repo,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    procs.append(proc)
    return proc


def _runs(tmp_path: Path) -> list[Path]:
    root = tmp_path / "runs"
    if not root.exists():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("repo-"))


def _working(tmp_path: Path) -> Path:
    """The one run, once its agent is working on an item."""
    _wait_for(lambda: len(_runs(tmp_path)) == 1)
    [folder] = _runs(tmp_path)
    _wait_for(lambda: _state(folder).get("agentPid") is not None)
    return folder


def _starts(folder: Path) -> list[object]:
    return [e["itemId"] for e in _events(folder) if e["type"] == "workitem_start"]


def test_a_second_worktree_backlog_run_is_refused(
    tmp_path: Path, repo: Path, started: list[subprocess.Popen[str]]
) -> None:
    tasks = _backlog(repo)
    _start_backlog_run(started, repo, "--worktree")
    owner = _working(tmp_path)
    held = tasks.read_bytes()

    second = run_cli(["run", "--backlog", "--worktree", *SLEEPER], cwd=repo)

    assert second.returncode == 4, second.stdout + second.stderr
    assert f"another run ({owner.name}) is active" in second.stderr
    assert second.stderr.count("\n") == 1
    assert _runs(tmp_path) == [owner]  # nothing was armed, no worktree made
    assert not (tmp_path / "runs" / "worktrees").exists() or [
        p.name for p in (tmp_path / "runs" / "worktrees").iterdir()
    ] == [owner.name]
    assert tasks.read_bytes() == held
    assert _starts(owner) == ["a"]


def test_a_backlog_run_in_the_checkout_is_refused_beside_a_worktree_one(
    tmp_path: Path, repo: Path, started: list[subprocess.Popen[str]]
) -> None:
    _backlog(repo)
    _start_backlog_run(started, repo, "--worktree")
    owner = _working(tmp_path)

    second = run_cli(["run", "--backlog", *SLEEPER], cwd=repo)

    assert second.returncode == 4, second.stdout + second.stderr
    assert f"another run ({owner.name}) is active" in second.stderr
    assert _runs(tmp_path) == [owner]


def test_a_prompt_run_in_a_worktree_beside_a_backlog_run_is_not_refused(
    tmp_path: Path, repo: Path, started: list[subprocess.Popen[str]]
) -> None:
    _backlog(repo)
    _start_backlog_run(started, repo)
    _working(tmp_path)

    other = run_cli(["run", "-p", "x", "--worktree", *ONCE], cwd=repo)

    assert other.returncode == 3, other.stdout + other.stderr  # its budget ended it


def test_arming_a_hook_backlog_run_is_refused_while_a_driver_owns_the_backlog(
    tmp_path: Path, repo: Path, started: list[subprocess.Popen[str]]
) -> None:
    tasks = _backlog(repo)
    _start_backlog_run(started, repo)
    owner = _working(tmp_path)
    held = tasks.read_bytes()

    armed = run_cli(["arm", "--backlog", "--session", "s-1"], cwd=repo)

    assert armed.returncode == 4, armed.stdout + armed.stderr
    assert f"another run ({owner.name}) is active" in armed.stderr
    assert _runs(tmp_path) == [owner]
    assert not list((tmp_path / "runs" / "hooks").glob("*.json"))
    assert tasks.read_bytes() == held


def test_a_driver_backlog_run_is_refused_while_a_hook_backlog_run_is_armed(
    tmp_path: Path, repo: Path, started: list[subprocess.Popen[str]]
) -> None:
    tasks = _backlog(repo)
    written = tasks.read_bytes()
    armed = run_cli(["arm", "--backlog", "--session", "s-1"], cwd=repo)
    assert armed.returncode == 0, armed.stdout + armed.stderr
    [hook_run] = _runs(tmp_path)

    for extra in ([], ["--worktree"]):
        second = run_cli(["run", "--backlog", *extra, *SLEEPER], cwd=repo)
        assert second.returncode == 4, second.stdout + second.stderr
        assert f"another run ({hook_run.name}) is active" in second.stderr
    assert _runs(tmp_path) == [hook_run]
    assert tasks.read_bytes() == written

    assert run_cli(["stop", hook_run.name], cwd=repo).returncode == 0
    after = run_cli(["run", "--backlog", *ONCE], cwd=repo)
    assert after.returncode == 3, after.stdout + after.stderr  # the stopped run owns nothing
