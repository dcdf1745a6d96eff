"""Hook-mode end-to-end helpers: a real agent CLI session in a project with autopilot's
Stop hook installed, against the scripted model server, offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.conftest import read_jsonl
from tests.e2e.conftest import under_model_server

if TYPE_CHECKING:
    from tests.e2e.clis import Setup


@dataclass
class HookSession:
    """One project with the hook installed, and what its runs wrote."""

    tmp_path: Path
    repo: Path
    agent: str

    @property
    def runs_root(self) -> Path:
        return self.tmp_path / "runs"

    @property
    def home(self) -> Path:
        path = self.tmp_path / "home"
        path.mkdir(exist_ok=True)
        return path

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ, HOME=str(self.home), AUTOPILOT_RUNS_DIR=str(self.runs_root))
        # The hook calls the autopilot of this interpreter, found on PATH at install.
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        # For the model's own shell commands (a login shell resets PATH).
        env["AUTOPILOT"] = str(Path(sys.executable).parent / "autopilot")
        for key in ("CLAUDECODE", "CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID"):
            env.pop(key, None)
        env.update(extra)
        return env

    def autopilot(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "autopilot", *args],
            cwd=self.repo,
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def run_cli(
        self, script: str, argv: list[str], setup: Setup, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """``argv`` (the agent CLI) in the project with the model server on ``script``,
        set up as ``setup`` says."""
        env = self.env()
        for key in setup.unset_env:
            env.pop(key, None)
        return under_model_server(
            script,
            argv,
            cwd=self.repo,
            env=env,
            timeout=timeout,
            set_env=setup.set_env,
            templates=setup.templates,
        )

    def run_dirs(self) -> list[Path]:
        return sorted(
            p for p in self.runs_root.iterdir() if p.is_dir() and (p / "state.json").exists()
        )

    def events(self, run_dir: Path) -> list[dict[str, Any]]:
        return read_jsonl(run_dir / "events.jsonl")

    def state(self, run_dir: Path) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((run_dir / "state.json").read_text())
        return loaded

    def armed_entries(self) -> list[str]:
        folder = self.runs_root / "hooks"
        return sorted(p.name for p in folder.glob("*.json")) if folder.is_dir() else []
