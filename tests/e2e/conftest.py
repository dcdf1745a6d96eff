"""End-to-end fixtures: the real agent CLIs (pinned in ``tests/e2e/package.json``,
installed by ``scripts/test.sh``) driven by ``autopilot run`` against the project's
scripted model server, inside a private network namespace where the machine allows.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from autopilot.testkit.offline import netns_prefix
from tests.conftest import git, read_jsonl

E2E_BIN_ENV = "AUTOPILOT_E2E_BIN_DIR"


def cli_path(name: str) -> Path:
    """The pinned CLI's executable; fails (never skips) when it is not installed."""
    bin_dir = os.environ.get(E2E_BIN_ENV) or str(
        Path.home() / ".cache" / "autopilot-e2e" / "node_modules" / ".bin"
    )
    path = Path(bin_dir) / name
    if not path.exists():
        if os.environ.get("AUTOPILOT_SKIP_E2E") == "1":
            pytest.skip("AUTOPILOT_SKIP_E2E=1")
        pytest.fail(f"{path} is missing: run 'bash scripts/test.sh' (it installs the agent CLIs)")
    return path


@dataclass
class E2ERun:
    """The outcome of one ``autopilot run`` under the offline runner."""

    returncode: int
    stdout: str
    stderr: str
    run_dir: Path
    requests: list[dict[str, object]]

    @property
    def events(self) -> list[dict[str, object]]:
        return read_jsonl(self.run_dir / "events.jsonl")

    @property
    def state(self) -> dict[str, object]:
        import json

        loaded: dict[str, object] = json.loads((self.run_dir / "state.json").read_text())
        return loaded


@pytest.fixture
def e2e_repo(tmp_path: Path) -> Path:
    """A fresh git repository for the agent to work in."""
    path = tmp_path / "work"
    path.mkdir()
    git(path, "init", "-q")
    git(path, "config", "user.email", "e2e@localhost")
    git(path, "config", "user.name", "e2e")
    (path / "README.md").write_text("e2e\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "start")
    return path


def run_offline(
    tmp_path: Path,
    repo: Path,
    *,
    script: str,
    autopilot_args: list[str],
    set_env: dict[str, str],
    timeout: float = 600,
) -> E2ERun:
    """``autopilot ARGS`` in ``repo`` with the model server running ``script``."""
    runs_root = tmp_path / "runs"
    requests_file = tmp_path / "requests.jsonl"
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "autopilot.testkit.offline", "--script", script]
    if netns_prefix() is not None:
        argv.append("--netns")
    argv += ["--requests-file", str(requests_file)]
    for key, value in set_env.items():
        argv += ["--set-env", f"{key}={value}"]
    argv += ["--", sys.executable, "-m", "autopilot", *autopilot_args]
    env = dict(os.environ, HOME=str(home), AUTOPILOT_RUNS_DIR=str(runs_root))
    env.pop("CLAUDECODE", None)
    done = subprocess.run(
        argv,
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    runs = sorted(p for p in runs_root.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(runs) == 1, (done.stdout, done.stderr)
    requests = read_jsonl(requests_file) if requests_file.exists() else []
    return E2ERun(done.returncode, done.stdout, done.stderr, runs[0], requests)


def assert_nothing_left_behind(repo: Path) -> None:
    """No process is left running in the repository."""
    left = []
    for process in psutil.process_iter(["pid", "cwd", "cmdline"]):
        try:
            if process.info["cwd"] and Path(process.info["cwd"]) == repo:
                left.append(process.info)
        except psutil.Error:
            continue
    assert left == []
