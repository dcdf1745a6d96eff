"""Shared fixtures: a scripted fake agent, a runs root, a git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test gets its own runs root and user config; no nesting markers leak in."""
    monkeypatch.setenv("AUTOPILOT_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    for key in list(os.environ):
        if key.startswith("AUTOPILOT_") and key != "AUTOPILOT_RUNS_DIR":
            monkeypatch.delenv(key)
    yield


FakeAgent = Callable[..., dict[str, str]]


@pytest.fixture
def fake_agent(tmp_path: Path) -> FakeAgent:
    """Write a fake-agent script; returns the env that points ``--agent claude`` at it."""

    def make(iterations: list[list[dict[str, Any]]], **options: Any) -> dict[str, str]:
        script = tmp_path / f"script-{len(list(tmp_path.glob('script-*.json')))}.json"
        script.write_text(json.dumps({"iterations": [{"steps": s} for s in iterations], **options}))
        launcher = tmp_path / "fake-claude"
        launcher.write_text(
            f'#!/bin/sh\nexec {sys.executable} -m autopilot.testkit.fake_agent "$@"\n'
        )
        launcher.chmod(0o755)
        return {"FAKE_AGENT_SCRIPT": str(script), "AUTOPILOT_CLAUDE_BIN": str(launcher)}

    return make


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run git in ``cwd`` (as a user would, hooks and all; ``env`` added to this
    process's environment) and return its stdout."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, **(env or {})),
    )
    return done.stdout


def init_repo(path: Path, *, user: str = "test", readme: str = "test repo\n") -> Path:
    """A new git repository at ``path`` with one commit (``README.md`` holding
    ``readme``) by ``user``."""
    path.mkdir()
    git(path, "init", "-q")
    git(path, "config", "user.email", f"{user}@localhost")
    git(path, "config", "user.name", user)
    (path / "README.md").write_text(readme)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "start")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty git repository with one commit."""
    return init_repo(tmp_path / "repo")


def run_cli(
    args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``autopilot ARGS`` as a separate process."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "autopilot", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every JSON line of a file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_one_end_per_attempt(events: list[dict[str, Any]]) -> None:
    """Each ``iteration_end`` closes the ``iteration_start`` before it: an attempt is
    never recorded twice (a retried iteration has a start and an end per attempt)."""
    open_number: object = None
    for event in events:
        if event["type"] == "iteration_start":
            open_number = event.get("iteration")
        elif event["type"] == "iteration_end":
            assert event.get("iteration") == open_number, (
                f"iteration_end of iteration {event.get('iteration')} closes no attempt"
            )
            open_number = None
